from experiments.models import Study
from experiments.services.datasets import dataset_create_bundled
from experiments.services.studies import study_create, study_start

TINY_SPACE = [
    {"name": "units", "type": "int", "min": 4, "max": 16, "step": 4, "sampling": "linear",
     "parent": None, "parent_values": []},
    {"name": "learning_rate", "type": "float", "min": 0.001, "max": 0.1, "step": None,
     "sampling": "log", "parent": None, "parent_values": []},
]

DENSE_SMALL_SPACE = [
    {"name": "num_layers", "type": "int", "min": 1, "max": 2, "step": 1, "sampling": "linear",
     "parent": None, "parent_values": []},
    {"name": "units", "type": "int", "min": 8, "max": 32, "step": 8, "sampling": "linear",
     "parent": None, "parent_values": []},
    {"name": "learning_rate", "type": "float", "min": 1e-3, "max": 1e-2, "step": None,
     "sampling": "log", "parent": None, "parent_values": []},
]


def digits(team, user, name="digits"):
    return dataset_create_bundled(team=team, user=user, bundled_name="digits", name=name)


def saved_study(team, user, dataset, **options) -> Study:
    options = {
        "name": "test study", "hypermodel": "tiny", "search_space": TINY_SPACE, "tuner": "random",
        "objective_metric": "val_accuracy", "objective_direction": "max", "max_trials": 3,
        "epochs": 2, "batch_size": 64, "patience": 2, "seed": 7, **options,
    }
    return study_create(team=team, user=user, dataset=dataset, **options)


def started_study(team, user, dataset, **options) -> Study:
    return study_start(study=saved_study(team, user, dataset, **options))
