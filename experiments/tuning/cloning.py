"""What a clone of a study takes from the original: one list for the clone page and the API."""

from experiments.models import Study
from experiments.tuning.pruning_options import MODEL_FIELDS as PRUNING_FIELDS
from experiments.tuning.stopping_rules import MODEL_FIELDS as STOPPING_FIELDS

# Everything that defines the search except where it runs (the dataset, which may change)
# and its name: space, tuner and its settings, objective, budget, training, compute and stopping rules.
CLONED_FIELDS = ["hypermodel", "search_space", "tuner", "objective_metric", "objective_direction", "max_trials",
                 "executions_per_trial", "epochs", "batch_size", "patience", "seed", "queue", "backend", "parallelism",
                 "initial_random_trials", "precision", "jit_compile", "steps_per_execution", "devices_per_trial",
                 *PRUNING_FIELDS, *STOPPING_FIELDS, "extra_objectives", "constraints"]

NAME_ROOM = Study._meta.get_field("name").max_length - len(" (copy)")


def clone_values(study: Study) -> dict:
    """The new-study form's values for a copy of `study`, on the same dataset until changed."""
    return {**{name: getattr(study, name) for name in CLONED_FIELDS},
            "name": f"{study.name[:NAME_ROOM]} (copy)", "dataset": study.dataset_id}
