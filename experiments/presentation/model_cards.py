"""The model card: everything a user needs to load, serve and trust a trained model, as one
JSON document built from the rows (no TensorFlow in the web process)."""

from experiments.models import ModelFile, TrainedModel
from experiments.presentation import figures

PREPROCESSING = {
    "tabular": "None needed: the model takes raw features. Standardisation is a Normalization layer inside the "
               "model, with the mean and variance of the rows it was trained on (train+validation when retrained, "
               "train when promoted).",
    "image": "None needed: the model takes raw uint8 pixels (0-255) of the dataset's image size and colour mode; "
             "rescaling (and, in training only, augmentation) are layers inside the model.",
    "text": "None needed: the model takes raw UTF-8 strings; tokenisation is a TextVectorization layer inside the "
            "model whose vocabulary was learned from the rows it was trained on.",
    "sequence": "None needed: the model takes raw float sequences (time steps x features); per-feature "
                "standardisation is a Normalization layer inside the model.",
}
FORMAT_INPUTS = {
    "image": "raw uint8 images, shape (batch, height, width, channels)",
    "text": "raw UTF-8 strings, shape (batch,)",
    "sequence": "float32 sequences, shape (batch, time steps, features)",
    "tabular": "float32 features, shape (batch, features)",
}


def format_inputs(*, kind: str, files: list, unavailable: dict) -> list[dict]:
    """Which input each download takes, and why a format is missing when it is."""
    taken = FORMAT_INPUTS.get(kind, FORMAT_INPUTS["tabular"])
    rows = [{"format": f.format, "input": taken} for f in files]
    rows += [{"format": fmt, "input": None, "unavailable": why} for fmt, why in sorted(unavailable.items())]
    return rows


def _lineage(model: TrainedModel, members: list) -> dict:
    if model.is_ensemble:
        return {"team": model.team.name, "ensemble": {
            "method": model.method, "greedy_rounds": model.greedy_rounds,
            "members": [{"label": figures.member_label(m), "model": str(m.model) if m.model_id else None,
                         "trial": m.trial.trial_id if m.trial_id else None,
                         "trial_number": m.trial.number if m.trial_id else None, "weight": m.weight,
                         "validation": figures.member_validation(m).metrics,
                         "validation_source": figures.member_validation(m).source.long,
                         "test": m.test_metrics} for m in members],
            "weights_fitted_on": "validation predictions of members trained on the training split only",
            # Weight 0: left out of every exported format (they would add size and inference time only).
            "dropped_members": [figures.member_label(m) for m in members if m.weight == 0],
        }}
    study, trial = model.study, model.trial
    return {
        "team": model.team.name,
        "study": {"id": study.id, "name": study.name, "tuner": study.tuner, "hypermodel": study.hypermodel,
                  "objective": {"metric": study.objective_metric, "direction": study.objective_direction}},
        "trial": {"id": trial.trial_id, "number": trial.number, "score": trial.score, "best_epoch": trial.best_epoch},
    }


def _warnings(model: TrainedModel, members: list) -> list[str]:
    dominant = figures.dominant_member([m.weight for m in members])
    return figures.model_warnings(
        model, study_epochs=model.study.epochs if model.study_id else None,
        trial_best_epoch=model.trial.best_epoch if model.trial_id else None,
        dominant_label=figures.member_label(members[dominant]) if dominant is not None else None)


def model_card(*, model: TrainedModel, files: list[ModelFile], members: list | None = None,
               variants: list[dict] | None = None) -> dict:
    study, dataset = model.study, model.dataset
    return {
        "name": model.name,
        "version": model.version,
        "created": model.created.isoformat(),
        "finished": model.finished.isoformat() if model.finished else None,
        "kind": model.kind,
        "status": model.status,
        "lineage": _lineage(model, members or []),
        "warnings": _warnings(model, members or []),
        "hyperparameters": model.hyperparameters,
        "training": {
            "method": model.method,
            "method_description": model.get_method_display(),
            "best_epoch_source": model.epoch_source or None,
            "best_epoch": model.best_epoch,
            "epochs": model.epochs,
            "epoch_cap": model.epoch_cap if model.method == TrainedModel.Method.RETRAIN else None,
            "batch_size": study.batch_size if study else None,
            "seed": model.seed,
            "seed_note": "the study's seed plus the trial's number, as in the search" if model.trial_id else None,
            "duration_seconds": model.duration_seconds,
        },
        "metrics": {
            "validation": figures.model_validation(model).metrics,
            "test": model.test_metrics,
            "validation_source": figures.model_validation(model).source.long,
            "note": "Validation metrics are from models trained on the training split only (validation_source "
                    "says which); test metrics are from this model, evaluated once.",
        },
        "dataset": {
            "name": dataset.name,
            "task": dataset.task,
            "kind": dataset.kind,
            "details": dataset.details,
            "rows": dataset.n_rows,
            "features": dataset.n_features,
            "feature_names": dataset.feature_names,
            "classes": dataset.classes,
            "split": {"val_fraction": dataset.val_fraction, "test_fraction": dataset.test_fraction,
                      "seed": dataset.split_seed, "sizes": dataset.split_sizes},
        },
        "preprocessing": PREPROCESSING.get(dataset.kind, PREPROCESSING["tabular"]),
        "inputs_by_format": format_inputs(kind=dataset.kind, files=files,
                                          unavailable=model.signature.get("unavailable", {})),
        "compute": model.compute,
        # Dataset hash and split, seed, versions, host and devices, hypermodel code
        # (experiments/tuning/reproducibility.py).
        "reproducibility": model.environment,
        "signature": model.signature,
        "package_versions": model.versions,
        "files": [
            {"format": f.format, "filename": f.artifact.filename, "size": f.artifact.size,
             "sha256": f.artifact.sha256}
            for f in files
        ],
        # Each asked-for variant's figures beside the float model's, on the test split (presentation/variants.py).
        "quantized_variants": variants or [],
    }
