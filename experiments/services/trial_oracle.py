"""What the trial lifecycle and the tuner adapter (workers/tuners/oracle.py) exchange: the Oracles protocol, claims,
outcomes and trial rows, so this side never imports KerasTuner."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from experiments.models import Study, Trial

# The reaper marks a lost trial in the database alone (it runs in the worker's main process,
# which never loads KerasTuner); this kt_state key says the tuner has not heard of it yet and
# how it should (fail: a lost attempt that counts; release: runs again without penalty).
TELL_TUNER = "tuneboard_tell"


class Oracles(Protocol):
    """The tuner adapter; see workers/tuners/oracle.py. It never touches the database: `load` gets the
    study's trial rows from `trial_rows_since` (trial_rows_for_oracle), and `keep` (called once
    the transaction commits) lets it reuse a rebuilt oracle for the study's next load."""

    def load(self, study: Study, trial_rows_since: Callable[[int], Iterable[tuple[dict, dict]]]): ...
    def propose(self, study: Study, oracle, tuner_id: str, seed: dict | None = None): ...
    def complete(self, oracle, trial_id: str, *, objective: str, score: float, best_step: int | None,
                 extra: dict | None = None, violations: list[float] | None = None): ...
    def fail(self, oracle, trial_id: str, *, error: str, lost: bool): ...
    def release(self, oracle, trial_id: str): ...
    def done(self, oracle) -> bool: ...
    def state(self, oracle) -> dict: ...
    def keep(self, study_id: int, version: int, oracle) -> None: ...


def trial_rows_for_oracle(study: Study) -> Callable[[int], Iterable[tuple[dict, dict]]]:
    """What the tuner adapter rebuilds the study's oracle from, read when it asks: given the
    oracle version it already holds, the (hyperparameters, kt_state) of every Trial row written
    since, oldest first (later attempts of a retried trial win)."""

    def since(version: int):
        return (Trial.objects.filter(study=study, oracle_version__gt=version).order_by("number")
                .values_list("hyperparameters", "kt_state"))

    return since


@dataclass
class Claimant:
    tuner_id: str  # unique per claim: KerasTuner hands a known tuner id its old trial back
    worker_host: str
    worker_name: str = ""


@dataclass
class Claim:
    # "running" | "idle" | "stopped" | "waiting" (its team's quota, or fair share, holds it) |
    # "job" (fair share gave the slot to a queued job, claimed: `job`, its kind in job.job_kind)
    status: str
    trial: Trial | None = None
    values: dict = field(default_factory=dict)
    job: object = None


@dataclass
class Outcome:
    # "completed" | "pruned" (its pruner stopped it: a result like a completed one) | "failed" |
    # "released" (stopped early with no fault of its own: the study
    # was cancelled or its worker shut down; it runs again later)
    status: str
    score: float | None = None
    best_step: int | None = None
    metrics: dict = field(default_factory=dict)
    error: str = ""
    checkpoint_id: int | None = None
    duration_seconds: float | None = None
    compute: dict = field(default_factory=dict)  # where and how it ran (workers/host/compute.py)
    environment: dict = field(default_factory=dict)  # what reproducing it takes (experiments/tuning/reproducibility.py)
    epochs_trained: int | None = None
    pruning: dict = field(default_factory=dict)  # the pruner's decision (pruners.Decision.record())
    resume: dict = field(default_factory=dict)  # released by preemption: where its next attempt goes on (Trial.resume)


@dataclass
class Finish:
    claim: Claim | None = None  # the finisher's next trial, claimed under the same lock


@dataclass
class Told:
    count: int = 0
    failure_limit: bool = False
