"""`tuneboard studies extend` and a study file with cost objectives, against a live server: the extension and its
refusal carry the API's words; device_seconds and seconds_per_epoch are objectives and constraints like any other."""

import json

import pytest

if not __import__("django.conf").conf.settings.configured:  # run with -p no:django: unit tests only
    pytest.skip("needs pytest-django (the live server and the test database)", allow_module_level=True)


from experiments.models import Study  # noqa: E402
from experiments.services.datasets import dataset_create_bundled  # noqa: E402
from tests.web.recipe_rows import study_with_trials  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)

COST_STUDY = """\
name: cheapest good model
dataset: {dataset}
hypermodel: dense
tuner: optuna_tpe
objective_metric: val_accuracy
objective_direction: max
max_trials: 4
epochs: 3
extra_objectives:
  - {{metric: device_seconds, direction: min}}
constraints:
  - {{metric: seconds_per_epoch, op: "<=", value: 2}}
search_space:
  - {{name: units, type: int, min: 8, max: 16, step: 8}}
"""


def test_extend_and_cost_objectives_from_the_command_line(acme, alice, live_tuneboard, tmp_path):
    tuneboard = live_tuneboard
    acme_dataset = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    (tmp_path / "study.yaml").write_text(COST_STUDY.format(dataset=acme_dataset.id))
    created = json.loads(tuneboard("-o", "json", "studies", "create", "--file", tmp_path / "study.yaml"))
    assert created["extra_objectives"] == [{"metric": "device_seconds", "direction": "min"}]
    assert created["constraints"] == [{"metric": "seconds_per_epoch", "op": "<=", "value": 2.0}]

    ended = study_with_trials(acme, alice, acme_dataset, "ended search", "dense", [0.3, 0.2])
    Study.objects.filter(pk=ended.pk).update(status=Study.Status.COMPLETED, max_trials=2, tuner="random")
    assert "2 trials have run: raise max trials above 2 to run more." in tuneboard(
        "studies", "extend", ended.id, "--max-trials", 2, code=1)
    done = tuneboard("studies", "extend", ended.id, "--max-trials", 6, "--tuner", "optuna_tpe", "--device-hours", 5)
    assert f"Study {ended.id} running: optuna_tpe, up to 6 trials" in done
    ended.refresh_from_db()
    assert (ended.stop_device_hours, [s["first_trial"] for s in ended.segments]) == (5.0, [1, 3])
