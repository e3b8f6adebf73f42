from django.db import migrations, models


class Migration(migrations.Migration):
    """A registered model records its output keys beside its input keys: the serving contract
    every version keeps. Rows made before start empty and adopt their first version's."""

    dependencies = [
        ('experiments', '0021_recipe_acts_for'),
    ]

    operations = [
        migrations.AddField(
            model_name='registeredmodel',
            name='output_keys',
            field=models.JSONField(default=list),
        ),
    ]
