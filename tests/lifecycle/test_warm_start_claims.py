"""Warm-start seeds in the claim path: they run first, in order, registered with the real
KerasTuner oracle as its own trials (random, Bayesian, grid, Hyperband); then the tuner
continues. A retry goes before the next seed, and seeds count towards max trials."""

from datetime import timedelta

import pytest
from django.utils import timezone

from experiments.models import Study, Trial
from experiments.services import studies, trial_claims, trial_reaper
from experiments.services.trial_oracle import Claimant, Outcome
from tests.integration.helpers import saved_study
from workers.tuners.oracle import KerasTunerOracles

ORACLES = KerasTunerOracles()
pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner"),
              pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")]

# Scores of the source study (val_accuracy, maximised): the top 3 are 0.9, 0.8, 0.7.
SOURCE = [({"units": 4, "learning_rate": 0.01}, 0.7), ({"units": 8, "learning_rate": 0.002}, 0.9),
          ({"units": 16, "learning_rate": 0.05}, 0.5), ({"units": 12, "learning_rate": 0.004}, 0.8)]
TOP3 = [SOURCE[1][0], SOURCE[3][0], SOURCE[0][0]]


@pytest.fixture
def source(acme, alice, iris):
    study = saved_study(acme, alice, iris, name="source", max_trials=4)
    for number, (values, score) in enumerate(SOURCE, start=1):
        Trial.objects.create(study=study, trial_id=str(number - 1), number=number, status=Trial.Status.COMPLETED,
                             hyperparameters=values, score=score, metrics={"val_accuracy": score})
    return study


def _seeded(acme, alice, iris, source, **options) -> Study:
    options = {"max_trials": 6, "top_k": 3, **options}
    study = saved_study(acme, alice, iris, name="seeded", seed_from=[source], **options)
    return studies.study_start(study=study)


def claim(study, tuner):
    return trial_claims.claim_trial(study_id=study.pk, claimant=Claimant(tuner_id=tuner, worker_host="h"),
                                  oracles=ORACLES)


def finish(trial, score):
    outcome = Outcome("completed", score=score, best_step=0, metrics={"val_accuracy": score})
    trial_claims.finish_trial(trial_pk=trial.pk, outcome=outcome, oracles=ORACLES)


def run(study, count, scores=None) -> list[Trial]:
    """Claim and finish `count` trials one after the other."""
    trials = []
    for i in range(count):
        claimed = claim(study, f"t{i}")
        assert claimed.status == "running", claimed.status
        finish(claimed.trial, (scores or {}).get(i, 0.5))
        trials.append(Trial.objects.get(pk=claimed.trial.pk))
    return trials


def test_seeds_run_first_in_order_and_then_the_random_tuner_continues(acme, alice, iris, source):
    study = _seeded(acme, alice, iris, source)
    assert [seed["hyperparameters"] for seed in study.seeds] == TOP3
    trials = run(study, 6)
    assert [t.hyperparameters for t in trials[:3]] == TOP3
    sources = {s.number: s.pk for s in source.trials.all()}
    assert [t.seeded_from_id for t in trials] == [sources[2], sources[4], sources[1], None, None, None]
    own = [t.hyperparameters for t in trials[3:]]
    assert all(values not in TOP3 for values in own)  # the tuner knows the seeds: no repeats
    assert len({tuple(sorted(v.items())) for v in own}) == 3
    study.refresh_from_db()
    assert study.seeds_used == 3 and study.status == Study.Status.COMPLETED
    assert len(study.oracle_state["end_order"]) == 6


def test_seeds_count_towards_max_trials(acme, alice, iris, source):
    study = _seeded(acme, alice, iris, source, max_trials=3)
    trials = run(study, 3)
    assert all(t.seeded_from_id for t in trials)
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED
    assert claim(study, "late").status == "stopped"


def test_parallel_claims_take_the_seeds_one_each_in_order(acme, alice, iris, source):
    study = _seeded(acme, alice, iris, source, parallelism=2)
    first, second = claim(study, "a").trial, claim(study, "b").trial
    assert [first.hyperparameters, second.hyperparameters] == TOP3[:2]
    finish(second, 0.6)
    third = claim(study, "c").trial
    assert third.hyperparameters == TOP3[2] and third.seeded_from_id is not None


def test_a_lost_seed_is_retried_as_a_seed_before_the_next_seed(acme, alice, iris, source):
    study = _seeded(acme, alice, iris, source, parallelism=1)
    lost = claim(study, "a").trial
    Trial.objects.filter(pk=lost.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    assert trial_reaper.trials_reap_stale() == 1
    retry = claim(study, "b").trial
    assert (retry.trial_id, retry.attempt, retry.hyperparameters) == (lost.trial_id, 2, TOP3[0])
    assert retry.seeded_from_id == lost.seeded_from_id is not None
    finish(retry, 0.9)
    assert claim(study, "c").trial.hyperparameters == TOP3[1]  # the second seed was not skipped
    study.refresh_from_db()
    assert study.seeds_used == 2


TOP4 = [*TOP3, SOURCE[2][0]]


# The seeds' scores rise with units (8, 12, 4, 16 scored 0.5, 0.75, 0.25, 1.0), or fall as the
# learning rate grows (0.002, 0.004, 0.01, 0.05 scored 0.85, 0.7, 0.5, 0.15).
FOLLOWS_UNITS = ([0.5, 0.75, 0.25, 1.0], lambda hp: hp["units"] == 16)
FOLLOWS_LEARNING_RATE = ([0.85, 0.7, 0.5, 0.15], lambda hp: hp["learning_rate"] <= 0.002)


@pytest.mark.parametrize(("scores", "where"), [FOLLOWS_UNITS, FOLLOWS_LEARNING_RATE], ids=["units", "learning_rate"])
def test_the_bayesian_tuner_learns_from_the_seeds_results(acme, alice, iris, source, scores, where):
    # The four completed seeds are its four initial points: the Gaussian process fitted on
    # their scores proposes where they point (along the other hyperparameter, which the scores
    # do not follow, it explores where it knows least).
    study = _seeded(acme, alice, iris, source, tuner="bayesian", initial_random_trials=4, top_k=4)
    seeds = run(study, 4, scores=dict(enumerate(scores)))
    assert [t.hyperparameters for t in seeds] == TOP4
    proposal = claim(study, "gp").trial
    assert proposal.seeded_from_id is None and proposal.hyperparameters not in TOP4
    assert where(proposal.hyperparameters), proposal.hyperparameters


GRID_SPACE = [
    {"name": "units", "type": "int", "min": 4, "max": 12, "step": 4, "sampling": "linear",
     "parent": None, "parent_values": []},
    {"name": "learning_rate", "type": "choice", "values": [0.01, 0.002], "ordered": False,
     "parent": None, "parent_values": []},
]


def test_grid_search_runs_the_seeds_first_and_then_only_the_rest_of_the_grid(acme, alice, iris, source):
    # The top 2 lie on this 3 x 2 grid, the second on its first point (the defaults).
    Trial.objects.filter(study=source, number=4).update(score=0.1)
    study = _seeded(acme, alice, iris, source, tuner="grid", search_space=GRID_SPACE, max_trials=6, top_k=2)
    assert [s["hyperparameters"] for s in study.seeds] == [SOURCE[1][0], SOURCE[0][0]]
    trials = run(study, 6)
    configurations = [(t.hyperparameters["units"], t.hyperparameters["learning_rate"]) for t in trials]
    assert configurations[:2] == [(8, 0.002), (4, 0.01)]
    assert sorted(configurations) == sorted((u, lr) for u in (4, 8, 12) for lr in (0.01, 0.002))
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED


def test_hyperband_seeds_take_the_places_of_bracket_candidates(acme, alice, iris, source):
    study = _seeded(acme, alice, iris, source, tuner="hyperband", epochs=9, max_trials=8)
    trials = run(study, 4)
    for trial, seed in zip(trials[:3], TOP3, strict=True):
        assert {k: v for k, v in trial.hyperparameters.items() if not k.startswith("tuner/")} == seed
        assert trial.hyperparameters["tuner/round"] == 0 and trial.seeded_from_id is not None
    assert trials[3].seeded_from_id is None


def _row(name, type_, **spec):
    return {"name": name, "type": type_, "parent": None, "parent_values": [], **spec}


CONDITIONAL_GRID = [
    _row("opt", "choice", values=["adam", "sgd", "rmsprop"], ordered=False),
    {**_row("momentum", "choice", values=[0.0, 0.9], ordered=True), "parent": "opt", "parent_values": ["sgd"]},
    {**_row("nesterov", "boolean"), "parent": "momentum", "parent_values": [0.9]},
    _row("batch", "int", min=16, max=64, step=2, sampling="log"),
    _row("dropout", "float", min=0.0, max=0.5, step=0.25, sampling="linear"),
]
GRID_SIZE = (1 + 3 + 1) * 3 * 3


@pytest.mark.parametrize("seeded", [False, True])
def test_a_conditional_grid_is_walked_whole_and_once_with_or_without_seeds(acme, alice, iris, seeded):
    options = {"tuner": "grid", "search_space": CONDITIONAL_GRID, "max_trials": 100, "parallelism": 1}
    seeds = [{"opt": "sgd", "momentum": 0.9, "nesterov": True, "batch": 32, "dropout": 0.25},
             {"opt": "adam", "batch": 16, "dropout": 0.0},  # the grid's first point
             {"opt": "rmsprop", "batch": 64, "dropout": 0.5}]  # its last
    if seeded:
        source = saved_study(acme, alice, iris, name="grid source", search_space=CONDITIONAL_GRID)
        for number, values in enumerate(seeds, start=1):
            Trial.objects.create(study=source, trial_id=str(number), number=number, hyperparameters=values,
                                 status=Trial.Status.COMPLETED, score=1 - number / 10)
        options.update(seed_from=[source], top_k=3)
    study = studies.study_start(study=saved_study(acme, alice, iris, name="grid", **options))
    trials = []
    while (claimed := claim(study, f"t{len(trials)}")).status == "running":
        finish(claimed.trial, 0.5)
        trials.append(claimed.trial.hyperparameters)
    assert len(trials) == GRID_SIZE
    assert len({tuple(sorted(values.items())) for values in trials}) == GRID_SIZE  # each point once
    if seeded:
        assert trials[:3] == seeds
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED
