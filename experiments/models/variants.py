"""Quantized variants of a trained model: each made on request by a job on a worker, measured on the test
split beside its float model before it is offered (workers/jobs/variants.py)."""

from django.conf import settings
from django.db import models

from experiments.models.artifacts import Artifact
from experiments.models.jobs import Job
from experiments.models.trained_models import TrainedModel


class ModelVariant(Job):
    """One quantized copy of a model. Its figures (`float` and `variant`, the same keys measured the same way on
    one worker) are what the model page and card set side by side; a variant is downloadable once COMPLETED."""

    class Method(models.TextChoices):
        KERAS_INT8 = "keras_int8", "Keras int8 (.keras)"
        KERAS_FLOAT8 = "keras_float8", "Keras float8 (.keras, for FP8 GPUs)"
        TFLITE_FULL_INTEGER = ("tflite_int8_full",
                               "TFLite full-integer int8 (input and output types as in the float model)")
        TFLITE_INTEGER_IO = "tflite_int8_io", "TFLite full-integer int8 (int8 input and output)"
        TFLITE_PER_TENSOR = "tflite_int8_tensor", "TFLite full-integer int8, one scale per tensor (smallest file)"
        TFLITE_DYNAMIC = "tflite_dynamic", "TFLite dynamic-range int8"

    model = models.ForeignKey(TrainedModel, on_delete=models.CASCADE, related_name="variants")
    method = models.CharField(max_length=20, choices=Method.choices)
    # The Celery queue its task goes to, fixed at the request: Keras variants where the model trained (a JAX
    # model on a JAX worker), TFLite ones on a TensorFlow worker of the cpu queue (services/job_kinds.py).
    queue = models.CharField(max_length=20)
    artifact = models.ForeignKey(Artifact, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # A Keras variant made where TensorFlow is: its SavedModel zip (as the model's own), what TF Serving loads
    # when the variant is a registered version. TFLite files and variants made on JAX workers have none.
    saved_model = models.ForeignKey(Artifact, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # {"float": {...}, "variant": {...}}: test-split metrics, size_bytes, latency_ms_batch1/64 per row.
    figures = models.JSONField(default=dict, blank=True)
    runtime = models.CharField(max_length=40, blank=True)  # what ran it: Keras, LiteRT or TensorFlow Lite
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["model", "id"]
        indexes = [models.Index(fields=["status", "heartbeat"])]

    def __str__(self) -> str:
        return f"{self.model} {self.get_method_display()}"

    @property
    def is_tflite(self) -> bool:
        return self.method.startswith("tflite")
