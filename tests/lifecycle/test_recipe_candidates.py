"""Who a recipe picks: the top K trials of each source study, at most M per hypermodel (or per
study), pruned trials in or out, tag sources, another team's study ignored; every trial
considered is listed with the reason it was or was not picked."""

import pytest

from experiments.models import TrainedModel
from experiments.selectors.recipes import Rule, candidates_fingerprint, recipe_candidates
from experiments.services.datasets import dataset_create_bundled
from tests.integration.helpers import saved_study
from tests.web.recipe_rows import study_with_trials

pytestmark = pytest.mark.django_db


@pytest.fixture
def studies(acme, alice, iris):
    dense = study_with_trials(acme, alice, iris, "dense a", "dense", [0.30, 0.31, 0.32, 0.50], pruned=(2,))
    dense_b = study_with_trials(acme, alice, iris, "dense b", "dense", [0.29, 0.40])
    tiny = study_with_trials(acme, alice, iris, "tiny", "tiny", [0.35, 0.36])
    return dense, dense_b, tiny


def _picked(candidates) -> list[tuple[str, int]]:
    return [(c.study_name, c.trial_number) for c in candidates if c.picked]


def test_top_k_per_study_then_at_most_m_per_hypermodel(acme, iris, studies):
    dense, dense_b, tiny = studies
    rule = Rule(team=acme, dataset_id=iris.id, study_ids=[s.id for s in studies], top_k=2, per_group_max=1)
    candidates = recipe_candidates(rule)
    # Each study's top 2 (dense a's pruned trial 2 left out), best first across studies.
    assert [(c.study_name, c.trial_number) for c in candidates] == [
        ("dense b", 1), ("dense a", 1), ("dense a", 3), ("tiny", 1), ("tiny", 2), ("dense b", 2)]
    assert _picked(candidates) == [("dense b", 1), ("tiny", 1)]
    assert {c.why for c in candidates if not c.picked} == {"hypermodel dense already has 1",
                                                            "hypermodel tiny already has 1"}
    assert all(c.to_retrain and c.key.startswith("retrain:") for c in candidates if c.picked)

    two = recipe_candidates(Rule(team=acme, dataset_id=iris.id, study_ids=[s.id for s in studies], top_k=2,
                                 per_group_max=2))
    assert _picked(two) == [("dense b", 1), ("dense a", 1), ("tiny", 1), ("tiny", 2)]


def test_grouping_by_study(acme, iris, studies):
    rule = Rule(team=acme, dataset_id=iris.id, study_ids=[s.id for s in studies], top_k=1, per_group_max=1,
                group_by="study")
    assert _picked(recipe_candidates(rule)) == [("dense b", 1), ("dense a", 1), ("tiny", 1)]


def test_pruned_trials_in_or_out(acme, iris, studies):
    dense = studies[0]
    out = recipe_candidates(Rule(team=acme, dataset_id=iris.id, study_ids=[dense.id], top_k=2, per_group_max=5))
    assert [c.trial_number for c in out] == [1, 3]
    within = recipe_candidates(Rule(team=acme, dataset_id=iris.id, study_ids=[dense.id], top_k=2, per_group_max=5,
                                    include_pruned=True))
    assert [(c.trial_number, c.pruned) for c in within] == [(1, False), (2, True)]


def test_tag_sources_and_other_teams_studies(acme, alice, globex, charlie, iris, studies):
    dense, dense_b, tiny = studies
    for study in (dense_b, tiny):
        study.tags = ["ensemble"]
        study.save(update_fields=["tags"])
    theirs = study_with_trials(globex, charlie, dataset_create_bundled(team=globex, user=charlie,
                                                                       bundled_name="iris"), "theirs", "dense", [0.01])
    theirs.tags = ["ensemble"]
    theirs.save(update_fields=["tags"])
    wine_study = saved_study(acme, alice, dataset_create_bundled(team=acme, user=alice, bundled_name="wine"),
                             name="wine")
    rule = Rule(team=acme, dataset_id=iris.id, study_ids=[theirs.id, wine_study.id], source_tag="ensemble",
                top_k=1, per_group_max=1)
    assert _picked(recipe_candidates(rule)) == [("dense b", 1), ("tiny", 1)]


def test_existing_models_and_the_fingerprint(acme, alice, iris, studies):
    dense = studies[0]
    trial = dense.trials.get(number=1)
    rule = Rule(team=acme, dataset_id=iris.id, study_ids=[dense.id], top_k=3, per_group_max=3, members_as="existing")
    assert _picked(recipe_candidates(rule)) == []
    assert {c.why for c in recipe_candidates(rule)} == {"no finished model of this trial"}
    before = candidates_fingerprint(recipe_candidates(rule))
    model = TrainedModel.objects.create(team=acme, dataset=iris, study=dense, trial=trial, name="m", version=1,
                                        method=TrainedModel.Method.RETRAIN, status=TrainedModel.Status.COMPLETED,
                                        seed=1, created_by=alice)
    picked = [c for c in recipe_candidates(rule) if c.picked]
    assert [(c.trial_number, c.key) for c in picked] == [(1, f"model:{model.id}")]
    assert candidates_fingerprint(recipe_candidates(rule)) != before
