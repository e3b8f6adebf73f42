"""The client's calls for quantized variants of a model (mixed into tuneboard_client.api.Client)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

# Quantized variants a model can have (experiments.models.ModelVariant.Method).
VARIANT_METHODS = ("keras_int8", "keras_float8", "tflite_int8_full", "tflite_int8_io", "tflite_int8_tensor",
                   "tflite_dynamic")
VARIANT_ACTIVE = ("queued", "running")


class VariantCalls:
    def quantize_model(self, model_id: int, method: str) -> dict:
        """Ask for a quantized variant of a model (one of VARIANT_METHODS); the variant, queued or already made."""
        return self.post(f"models/{int(model_id)}/variants/", {"method": method})

    def list_variants(self, model_id: int) -> list[dict]:
        """A model's variants, each with its figures beside the float model's ("summary")."""
        return self.get(f"models/{int(model_id)}/variants/")

    def wait_variant(self, model_id: int, variant_id: int, *, interval: float = 2.0,
                     sleep: Callable[[float], None] = time.sleep) -> dict:
        """Poll a variant until it is neither queued nor running."""
        while True:
            current = next(v for v in self.list_variants(model_id) if v["id"] == variant_id)
            if current.get("status") not in VARIANT_ACTIVE:
                return current
            sleep(interval)

    def download_variant(self, model_id: int, variant_id: int, destination: str | os.PathLike) -> Path:
        """A made variant's file, checked as model downloads are."""
        return self._download_checked(f"models/{int(model_id)}/variants/{int(variant_id)}/download/", destination,
                                      fallback=f"model-{model_id}-variant-{variant_id}")
