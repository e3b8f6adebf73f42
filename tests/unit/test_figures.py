"""What each figure is (experiments/presentation/figures.py), the one rounding filter, and the limits that
decided a result; pure functions, no database."""

from types import SimpleNamespace

import pytest

from experiments.presentation import figures
from experiments.templatetags.tuneboard import figure, metric_list, trial_name


def _model(**fields):
    base = {"kind": "single", "method": "retrain", "epoch_source": "detect", "best_epoch": 10, "epoch_cap": 100,
            "trial_id": 7, "val_metrics": {"loss": 0.0366}, "trial": SimpleNamespace(metrics={})}
    return SimpleNamespace(**{**base, **fields})


@pytest.mark.parametrize("fields, source", [
    ({}, "search-phase checkpoint"),
    ({"epoch_source": "recorded"}, "search-phase checkpoint"),
    ({"method": "promote", "epoch_source": ""}, "the trial's checkpoint"),
    ({"kind": "ensemble", "method": "nelder_mead", "epoch_source": ""}, "members' blend"),
])
def test_each_model_names_the_source_of_its_validation_figures(fields, source):
    assert figures.validation_source(_model(**fields)).short == source
    assert figures.validation_source({**vars(_model()), **fields}).short == source  # rows as dicts too
    assert figures.model_validation(_model(**fields)).source.short == source


def test_a_retrained_model_shows_its_trials_checkpoint_figure_not_its_detection_run():
    model = _model(trial=SimpleNamespace(metrics={"val_loss": 0.1411, "val_accuracy": 0.96, "loss": 0.05}))
    shown = figures.model_validation(model)
    assert shown.metrics == {"loss": 0.1411, "accuracy": 0.96}  # not the stored 0.0366 of the detection run
    assert shown.source.short == "search-phase checkpoint"
    # The same figure from a leaderboard row (a dict with the trial's metrics) and as an ensemble weighs it.
    row = {**vars(_model()), "trial__metrics": {"val_loss": 0.1411, "val_accuracy": 0.96}}
    assert figures.model_validation(row) == shown == figures.validation(model)


def test_promoted_models_ensembles_and_trials_show_their_own_figures():
    promoted = figures.model_validation(_model(method="promote", epoch_source=""))
    assert promoted.metrics == {"loss": 0.0366}
    ensemble = figures.model_validation(_model(kind="ensemble", method="mean", val_metrics={"loss": 0.2}))
    assert ensemble.metrics == {"loss": 0.2} and ensemble.source.short == "members' blend"
    trial = figures.validation(SimpleNamespace(metrics={"val_loss": 0.2, "loss": 0.1}))
    assert trial.metrics == {"loss": 0.2} and trial.source.short == "search-phase checkpoint"


def test_an_ensemble_member_shows_its_models_figure():
    model = _model(trial=SimpleNamespace(metrics={"val_loss": 0.1411}))
    member = SimpleNamespace(model_id=1, model=model, trial_id=None, trial=None)
    assert figures.member_validation(member) == figures.model_validation(model)
    trial = SimpleNamespace(metrics={"val_loss": 0.3})
    assert figures.member_validation(SimpleNamespace(model_id=None, model=None, trial=trial)).metrics == {"loss": 0.3}


@pytest.mark.parametrize("value, shown", [
    (0.875, "0.8750"), (0.14114987, "0.1411"), (1.0, "1.0000"), (0, "0"), (0.0, "0.0000"),
    (3.2145e-05, "3.214e-05"), (1234.56789, "1234.5679"), (None, "—"), (float("nan"), "NaN"), (7, "7"),
])
def test_one_rounding_rule_for_every_figure(value, shown):
    assert figure(value) == shown


def test_metric_lists_and_trial_names_read_the_same_everywhere():
    assert metric_list({"loss": 0.12345, "accuracy": 0.9}) == "accuracy 0.9000, loss 0.1235"
    assert metric_list({}) == "—"
    assert trial_name(SimpleNamespace(number=1)) == "Trial 1"
    assert trial_name({"number": 12}) == "Trial 12"


@pytest.mark.parametrize("best_epoch, epochs, improving", [(10, 10, True), (9, 10, False), (None, 10, False)])
def test_a_trial_whose_best_epoch_is_the_last_was_still_improving(best_epoch, epochs, improving):
    assert figures.trial_still_improving(best_epoch=best_epoch, epochs=epochs) is improving


def test_the_study_warns_when_most_or_all_completed_trials_were_still_improving():
    assert figures.study_still_improving(completed=8, at_last_epoch=8, epochs=20).startswith(
        "All 8 completed trials had their best epoch at the last epoch (20)")
    assert figures.study_still_improving(completed=8, at_last_epoch=5, epochs=20).startswith("5 of 8 completed")
    assert figures.study_still_improving(completed=8, at_last_epoch=4, epochs=20) is None
    assert figures.study_still_improving(completed=0, at_last_epoch=0, epochs=20) is None


def test_a_retrain_whose_best_epoch_was_the_cap_says_raise_it():
    assert figures.retrain_hit_cap(_model(best_epoch=100, epoch_cap=100))
    assert not figures.retrain_hit_cap(_model(best_epoch=99, epoch_cap=100))
    assert not figures.retrain_hit_cap(_model(best_epoch=100, epoch_cap=100, epoch_source="recorded"))
    assert not figures.retrain_hit_cap(_model(method="promote", best_epoch=100, epoch_cap=100))
    assert "raise it" in figures.model_warnings(_model(best_epoch=100, epoch_cap=100))[0]


def test_an_ensemble_that_is_one_member_is_found():
    assert figures.dominant_member([1.0, 0.0, 0.0]) == 0
    assert figures.dominant_member([0.004, 0.996]) == 1
    assert figures.dominant_member([0.5, 0.5]) is None
    assert figures.dominant_member([0.98, 0.02]) is None
    assert figures.dominant_member([1.0]) is None and figures.dominant_member(None) is None
    warning = figures.model_warnings(_model(kind="ensemble", method="mean", best_epoch=None), dominant_label="m v1")
    assert warning == ["Effectively a single model: m v1 carries at least 99% of the weight."]


def test_learning_curves_keep_the_marked_epochs_when_a_long_run_is_downsampled():
    from experiments.presentation import study_charts

    rows = [{"phase": "best_epoch", "epoch": e, "metrics": {"loss": 1 / (e + 1), "val_loss": 1.0, "mae": 0.5,
                                                            "val_mae": 0.6}} for e in range(1000)]
    series = study_charts.series_by(rows, "phase", str.upper)
    curves = study_charts.learning_curves(series, task="regression", marks=[{"epoch": 777, "label": "best epoch"}])
    drawn = curves["series"][0]
    assert curves["metric"] == "mae" and drawn["name"] == "BEST_EPOCH" and drawn["total"] == 1000
    assert len(drawn["epoch"]) <= study_charts.MAX_LEARNING_CURVE_POINTS + 1 and 777 in drawn["epoch"]
    assert drawn["epoch"][0] == 1 and drawn["epoch"][-1] == 1000
    assert study_charts.learning_curves(series, task="classification")["metric"] == "mae"  # what the rows hold


def test_table_dates_are_short_with_the_full_date_in_the_tooltip():
    from datetime import timedelta

    from django.utils import timezone

    from experiments.templatetags.tuneboard import when

    now = timezone.now().replace(hour=14, minute=5)
    today = when(now)
    assert ">14:05</time>" in today and f'title="{now:%Y-%m-%d} 14:05"' in today
    last_year = when(now.replace(year=now.year - 1))
    assert f">{now.day} {now:%b} {now.year - 1}</time>" in last_year
    earlier = now - timedelta(days=1)
    if earlier.year == now.year:
        assert f">{earlier.day} {earlier:%b} 14:05</time>" in when(earlier)
    assert when(None) == "—"
