# Pruning: per-study settings, the PRUNED trial state, best-so-far values per epoch and their finished-trial copies.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('experiments', '0012_reproducibility'),
    ]

    operations = [
        migrations.AddField(
            model_name='study',
            name='pruner',
            field=models.CharField(choices=[('none', 'None'), ('median', 'Median'), ('percentile', 'Percentile'), ('successive_halving', 'Successive halving (asynchronous, ASHA)')], default='none', max_length=20),
        ),
        migrations.AddField(
            model_name='study',
            name='pruning_min_epochs',
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.AddField(
            model_name='study',
            name='pruning_min_trials',
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.AddField(
            model_name='study',
            name='pruning_percentile',
            field=models.FloatField(default=25.0),
        ),
        migrations.AddField(
            model_name='study',
            name='pruning_reduction_factor',
            field=models.PositiveIntegerField(default=3),
        ),
        migrations.AddField(
            model_name='study',
            name='pruning_startup_trials',
            field=models.PositiveIntegerField(default=5),
        ),
        migrations.AddField(
            model_name='study',
            name='pruning_warmup_epochs',
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.AddField(
            model_name='trial',
            name='epochs_trained',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='trial',
            name='pruning',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name='trialepoch',
            name='best_objective',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='trial',
            name='status',
            field=models.CharField(choices=[('running', 'Running'), ('completed', 'Completed'), ('failed', 'Failed'), ('cancelled', 'Cancelled'), ('lost', 'Lost'), ('pruned', 'Pruned')], default='running', max_length=10),
        ),
        migrations.CreateModel(
            name='PruningReference',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('execution', models.PositiveIntegerField()),
                ('epoch', models.PositiveIntegerField()),
                ('best_objective', models.FloatField()),
                ('completed', models.BooleanField()),
                ('study', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='experiments.study')),
                ('trial', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='experiments.trial')),
            ],
            options={
                'indexes': [models.Index(fields=['study', 'execution', 'epoch', 'best_objective', 'completed'], name='pruning_reference_lookup')],
                'constraints': [models.UniqueConstraint(fields=('trial', 'execution', 'epoch'), name='one_reference_per_epoch')],
            },
        ),
    ]
