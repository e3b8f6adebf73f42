from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('experiments', '0005_invitations'),
    ]

    operations = [
        migrations.AddField(
            model_name='team',
            name='ranking_metric',
            field=models.CharField(blank=True, default='', max_length=50),
        ),
    ]
