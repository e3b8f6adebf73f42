"""Asking for a quantized variant of a model: one form for the model page and the API (the CLI posts to the API)."""

from django import forms

from experiments.forms.checks import FormChecks
from experiments.models import ModelVariant, TrainedModel
from experiments.services.variants import variant_model_problem


class VariantRequestForm(FormChecks, forms.Form):
    method = forms.ChoiceField(label="Variant", choices=ModelVariant.Method.choices,
                               initial=ModelVariant.Method.TFLITE_FULL_INTEGER, help_text=(
                                   "Keras int8: Dense and Embedding weights in int8, a .keras file made on the "
                                   "worker the model trained on. Keras float8: FP8 scaling for GPUs with FP8 "
                                   "units (H100 and later); not smaller on disk. TFLite full-integer: int8 "
                                   "weights and activations calibrated on training rows, for integer-only "
                                   "accelerators (int8 input and output too, if asked; one scale per tensor "
                                   "for the smallest file and accelerators that need it). TFLite "
                                   "dynamic-range: int8 weights, float activations."))

    def __init__(self, *args, model: TrainedModel | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.model = model

    def clean(self):
        data = super().clean()
        if not self.errors and self.model is not None and (
                problem := variant_model_problem(self.model, data.get("method"))):
            raise forms.ValidationError(problem)
        return data
