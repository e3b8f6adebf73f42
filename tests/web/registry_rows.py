"""Finished models that can be registered, without training: the signature is what
workers/export/formats.py records for a dense model on iris rows (4 float features, 3 classes)."""

from django.utils.text import slugify

from experiments.models import TrainedModel, Trial
from tests.web.figures_rows import finished_model


def signature(shape=(None, 4), dtype="float32", classes=3, *, keras_name="features", served_as="input_0") -> dict:
    """`served_as`: the SavedModel's input key: `input_0` as exports name it, or the Keras input's
    name (`features`, `images`) as SavedModels exported before did."""
    inputs = [{"name": keras_name, "shape": list(shape), "dtype": dtype}]
    outputs = [{"name": "output_0", "shape": [None, classes], "dtype": "float32"}]
    return {"keras": {"inputs": inputs, "outputs": outputs},
            "serving": {"name": "serving_default", "inputs": [inputs[0] | {"name": served_as}], "outputs": outputs},
            "input_description": {"keras": f"{shape[1]} numbers per row"}, "unavailable": {}}


def registrable(team, user, study, number: int, *, test_accuracy: float = 0.9, **fields):
    """A completed model of `study`'s trial `number` (made if missing), named as retraining names it."""
    trial, _ = Trial.objects.get_or_create(study=study, number=number, defaults={
        "trial_id": str(number - 1), "status": Trial.Status.COMPLETED, "hyperparameters": {"units": 4 * number},
        "score": test_accuracy, "best_epoch": 2})
    fields.setdefault("signature", signature())
    status = fields.pop("status", None)
    name = fields.pop("name", f"{slugify(study.name)}-trial-{trial.number}")
    model = finished_model(team, user, study, trial, name=name,
                           test={"accuracy": test_accuracy, "loss": round(1 - test_accuracy, 4)}, **fields)
    if status is not None:
        TrainedModel.objects.filter(pk=model.pk).update(status=status)
        model.status = status
    return model
