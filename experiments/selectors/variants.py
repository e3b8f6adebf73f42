"""Reads of quantized variants for the pages and the API."""

from experiments.models import ModelVariant, TrainedModel


def model_variants(*, model: TrainedModel) -> list[ModelVariant]:
    """The model's variants, newest last, with their files."""
    return list(model.variants.select_related("artifact").order_by("id"))


def model_variant(*, model: TrainedModel, variant_id: int) -> ModelVariant | None:
    """One variant of the model (the model already checked to be the team's), or None."""
    return model.variants.select_related("artifact", "model").filter(pk=variant_id).first()
