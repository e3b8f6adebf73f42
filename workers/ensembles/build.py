"""Build one ensemble on a worker: weights fitted on validation predictions only (search-phase ones for retrained
members, so nothing leaks), metrics, correlation, one exported Keras model."""

import io
import logging
from pathlib import Path

import numpy as np

from experiments.selectors.artifacts import artifact_copy_to_path
from experiments.selectors.prediction_cache import cached_predictions_read
from experiments.selectors.training_inputs import ensemble_members, model_file_artifact
from experiments.services.prediction_cache import cached_predictions_store
from workers.ensembles import blending
from workers.ensembles.correlation_cap import correlation_cap
from workers.ensembles.keras_models import has_softmax_head, stacked_model, weighted_average_model
from workers.export.formats import export_model
from workers.training.dataset_cache import load_dataset
from workers.training.inference import predict
from workers.training.model_building import model_from_trial_checkpoint
from workers.trial_stops import TrialFailed

log = logging.getLogger(__name__)
PREDICT_BATCH = 1024
EXACT = 1e-5  # the exported model must reproduce the weighted sum (or the meta-learner) of the members' predictions


def _cached(team, key: str, compute) -> np.ndarray:
    stored = cached_predictions_read(key=key)
    if stored is not None:
        with np.load(io.BytesIO(stored)) as npz:
            return npz["predictions"]
    predictions = compute()
    buffer = io.BytesIO()
    np.savez(buffer, predictions=predictions)
    cached_predictions_store(team=team, key=key, fileobj=buffer)
    return predictions


class _Member:
    """One member's two faces: the model whose validation predictions fit the weights (trained
    on train only) and the model that goes into the ensemble (and makes test predictions)."""

    def __init__(self, row, workdir: Path):
        self.row, self.workdir = row, workdir
        self._models: dict[str, object] = {}

    @property
    def label(self) -> str:
        return self.row.label

    def _load_keras(self, model):
        import keras

        artifact = model_file_artifact(model=model, file_format="keras")
        if artifact is None:
            raise TrialFailed(f"Member {model} has no .keras file to load.")
        path = artifact_copy_to_path(artifact=artifact, path=self.workdir / f"member-{model.pk}.keras")
        # safe_mode off: Tuneboard wrote this file itself, and some application hypermodels
        # (ResNeXt) hold Lambda layers that safe mode refuses.
        return keras.models.load_model(path, safe_mode=False)

    def _source(self, split: str) -> str:
        return self.key(split).rsplit(":", 1)[0]

    def _load(self, split: str):
        """The Keras model behind `split`'s predictions, loaded once per source."""
        source = self._source(split)
        if source not in self._models:
            row = self.row
            if source.startswith("trial:"):
                trial = row.trial if row.trial_id else row.model.trial
                self._models[source] = model_from_trial_checkpoint(trial, self.workdir)
            else:
                self._models[source] = self._load_keras(row.model)
        return self._models[source]

    def key(self, split: str) -> str:
        row = self.row
        if row.trial_id:
            return f"trial:{row.trial_id}:{split}"
        if split == "val" and row.model.method == row.model.Method.RETRAIN:
            return f"trial:{row.model.trial_id}:val"  # the search-phase checkpoint, trained on train only
        return f"model:{row.model_id}:{split}"

    def predictions(self, team, split: str, x: np.ndarray) -> np.ndarray:
        def compute():
            try:
                model = self._load(split)
            except TrialFailed:
                raise
            except Exception as exc:  # a corrupted artifact, a hypermodel that changed, custom layers
                raise TrialFailed(f"Member {self.label} cannot be loaded: {type(exc).__name__}: {exc}") from exc
            return predict(model, x, PREDICT_BATCH)

        return _cached(team, self.key(split), compute)

    def final_model(self):
        return self._load("test")


def _stack(members: list[_Member], team, split: str, x: np.ndarray, task: str) -> np.ndarray:
    predictions = [m.predictions(team, split, x) for m in members]
    shapes = {m.label: p.shape for m, p in zip(members, predictions, strict=True)}
    if len(set(shapes.values())) > 1:
        raise TrialFailed("The members' outputs differ in shape, so they cannot be averaged: "
                          + ", ".join(f"{label} {shape}" for label, shape in shapes.items()) + ".")
    stacked = np.stack(predictions).astype("float64")
    if task == "regression" and stacked.ndim == 2:
        stacked = stacked[:, :, None]
    if not np.all(np.isfinite(stacked)):
        bad = [m.label for m, p in zip(members, predictions, strict=True) if not np.all(np.isfinite(p))]
        raise TrialFailed(f"Member predictions hold NaN or infinite values: {', '.join(bad)}.")
    return stacked


def _as_model_metrics(split_metrics: dict) -> dict:
    """The same keys single models report (Keras's: loss, accuracy / mae), so the leaderboard
    compares like with like."""
    renamed = dict(split_metrics)
    renamed["loss"] = renamed.pop("log_loss", None) if "log_loss" in renamed else renamed.pop("mse")
    return renamed


def _both(val_predicted: np.ndarray, test_predicted: np.ndarray, data, task: str) -> dict:
    return {"val": _as_model_metrics(blending.metrics(val_predicted, data.y_val, task)),
            "test": _as_model_metrics(blending.metrics(test_predicted, data.y_test, task))}


def _members_and_mean(members, weights, val, test, data, task: str) -> tuple[list[dict], int, dict]:
    """Each member's figures (with its weight), the best member by validation loss, the mean's figures."""
    member_results = [{"weight": float(weights[i]), **_both(val[i], test[i], data, task)}
                      for i in range(len(members))]
    best = min(range(len(members)), key=lambda i: member_results[i]["val"]["loss"])
    return member_results, best, _both(val.mean(axis=0), test.mean(axis=0), data, task)


def _export_gap(combined, x_test: np.ndarray, expected: np.ndarray, what: str) -> float:
    exported_predictions = predict(combined, x_test, PREDICT_BATCH)
    gap = float(np.max(np.abs(exported_predictions.reshape(expected.shape) - expected)))
    if gap > EXACT:
        raise TrialFailed(f"The exported ensemble differs from {what} by {gap:.2g}.")
    return gap


def _result(row, members, *, weights, kept, fit, val, test, ensemble_val, ensemble_test, combined, expected, what,
            data, task: str, workdir: Path, cap, extra: dict) -> dict:
    """What both kinds of ensemble hand back: the figures of the ensemble (predictions given),
    of each member, the mean and the best member; the exported model, checked against `expected`
    (its test predictions) to EXACT; the report the page and the card read."""
    result = _both(ensemble_val, ensemble_test, data, task)
    member_results, best, mean = _members_and_mean(members, weights, val, test, data, task)
    gap = _export_gap(combined, data.x_test, expected, what)
    exported = export_model(combined, workdir=workdir, name=row.name, version=row.version)
    report = {
        "method": row.method,
        "weights": [float(w) for w in weights],
        "members": [m.label for m in members],
        # Weight 0 (below blending.NEGLIGIBLE_WEIGHT, or left out by a correlation cap): in no exported format.
        "dropped_members": [members[i].label for i in range(len(members)) if i not in kept],
        "validation_source": [("search-phase checkpoint" if m.key("val") != m.key("test") else "itself")
                              for m in members],
        "fit": {"val_loss": fit.val_loss, "evaluations": fit.evaluations},
        "comparison": {
            "ensemble": result,
            "mean": mean,
            "best_member": {"label": members[best].label, **member_results[best]},
        },
        "correlation": blending.correlation(val).round(4).tolist(),
        "export_max_abs_difference": gap,
        **cap.report(),
    }
    for key, value in extra.items():
        report[key] = {**report[key], **value} if isinstance(report.get(key), dict) else value
    return {"val_metrics": result["val"], "test_metrics": result["test"], "report": report,
            "members": member_results, "exported": exported}


def _stacked_result(row, members, fit, cap, val, test, data, task: str, workdir: Path) -> dict:
    """Stacking's result: the meta-learner refitted on all validation predictions predicts, and every member the cap
    kept ships."""
    stacker, kept = fit.stacker, cap.kept
    test_predicted = stacker.predict(test[kept])
    combined = stacked_model([members[i].final_model() for i in kept], stacker, tuple(data.x_test.shape[1:]), task)
    extra = {"weights_meaning": "each member's share of the meta-learner's coefficient L2 norm (not a mixing weight)",
             "fit": {"val_loss_in_sample": True, "cv_loss": stacker.cv_loss},
             "meta_learner": stacker.as_report()}
    return _result(row, members, weights=cap.spread(fit.weights), kept=kept, fit=fit, val=val, test=test,
                   ensemble_val=stacker.predict(val[kept]), ensemble_test=test_predicted, combined=combined,
                   expected=test_predicted, what="its meta-learner's predictions", data=data, task=task,
                   workdir=workdir, cap=cap, extra=extra)


def build_ensemble(row, *, workdir: Path) -> dict:
    """Returns what trained_models.model_complete needs (but files, which the caller stores)."""
    data, info = load_dataset(row.dataset)
    task = row.dataset.task
    members = [_Member(m, workdir) for m in ensemble_members(ensemble=row)]
    team = row.team
    val = _stack(members, team, "val", data.x_val, task)
    test = _stack(members, team, "test", data.x_test, task)
    # A recipe's correlation cap: members too alike to a better one get weight 0 before the fit.
    cap = correlation_cap(row.report, val, [m.label for m in members])
    # Log-probability features ship through the members' logits, so only members that end in
    # a Dense softmax layer (all of Tuneboard's hypermodels) may use them.
    features = ("auto" if row.method != "stacking"
                or all(has_softmax_head(members[i].final_model()) for i in cap.kept) else "probabilities")
    try:
        fit = blending.fit(cap.method(row.method), val[cap.kept], data.y_val, task,
                            rounds=row.greedy_rounds or 50, seed=row.seed, stacking_features=features)
    except blending.EnsembleFitError as exc:
        raise TrialFailed(str(exc)) from exc
    if fit.stacker is not None:
        return _stacked_result(row, members, fit, cap, val, test, data, task, workdir)
    # Every figure below, and the exported model, use the same weights: a negligible member is
    # dropped from all of them alike, so the files reproduce what the page reports.
    weights = blending.without_negligible(cap.spread(fit.weights))
    kept = [i for i, w in enumerate(weights) if w > 0]
    # Only the members that carry weight are loaded and exported.
    combined = weighted_average_model([members[i].final_model() for i in kept], [float(weights[i]) for i in kept],
                                      tuple(data.x_test.shape[1:]), task, positions=kept)
    test_predicted = blending.blend(test, weights)
    return _result(row, members, weights=weights, kept=kept, fit=fit, val=val, test=test,
                   ensemble_val=blending.blend(val, weights), ensemble_test=test_predicted, combined=combined,
                   expected=test_predicted, what="the weighted sum of its members", data=data, task=task,
                   workdir=workdir, cap=cap, extra={})
