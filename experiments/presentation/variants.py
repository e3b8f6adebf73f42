"""A model's quantized variants as the model page, the model card and the API show them: each figure of the
variant beside the float model's, measured the same way on one worker (workers/export/variants.py), and a
plain warning where the variant loses too much."""

from django.conf import settings

from experiments.states import JobStatus

RUNTIME_NOTES = {
    "LiteRT": "scored with LiteRT's interpreter (ai-edge-litert)",
    "TensorFlow Lite": "scored with TensorFlow's tf.lite interpreter (ai-edge-litert is not installed on that "
                       "worker; TensorFlow marks this interpreter deprecated in its favour)",
    "Keras": "scored with Keras on the worker's backend; sizes compare .keras files without optimizer state (the "
             "model's own .keras download keeps it, and is larger)",
}


def accuracy_drop_warning(figures: dict) -> str:
    """Why a variant should be checked before use: its test accuracy more than
    QUANTIZATION_WARN_ACCURACY_DROP below the float model's (regression: its mean absolute error more than that
    fraction above), else ""."""
    limit = settings.QUANTIZATION_WARN_ACCURACY_DROP
    base, made = figures.get("float", {}).get("metrics", {}), figures.get("variant", {}).get("metrics", {})
    if made.get("mae", 0.0) is None or made.get("log_loss", 0.0) is None:  # overflowed on the worker (NaN, inf)
        return "Its outputs overflowed on the test split (a figure is not finite): do not use this variant."
    if "accuracy" in base and "accuracy" in made and base["accuracy"] - made["accuracy"] > limit:
        return (f"Test accuracy drops by {100 * (base['accuracy'] - made['accuracy']):.1f} points "
                f"(more than {100 * limit:g} point{'s' if 100 * limit != 1 else ''}): check it on your own data before "
                "using this variant.")
    if base.get("mae") and "mae" in made and (made["mae"] - base["mae"]) / base["mae"] > limit:
        return (f"Test mean absolute error rises by {100 * (made['mae'] / base['mae'] - 1):.1f}% "
                f"(more than {100 * limit:g}%): check it on your own data before using this variant.")
    return ""


def _ratio(made, base):
    return made / base if made is not None and base else None


def variant_summary(variant) -> dict:
    """One variant's figures side by side: {"metrics": {name: {float, variant}}, "size_bytes": {...},
    "latency_ms_batch1": {...}, "latency_ms_batch64": {...}} where each {...} has float, variant and ratio;
    with the warning and how it was scored."""
    base, made = variant.figures.get("float", {}), variant.figures.get("variant", {})
    names = sorted(set(base.get("metrics", {})) | set(made.get("metrics", {})))
    summary = {
        "method": variant.method, "label": variant.get_method_display(), "status": variant.status,
        "error": variant.error, "runtime": variant.runtime, "runtime_note": RUNTIME_NOTES.get(variant.runtime, ""),
        "metrics": {name: {"float": base.get("metrics", {}).get(name), "variant": made.get("metrics", {}).get(name)}
                    for name in names},
        "warning": accuracy_drop_warning(variant.figures) if variant.figures else "",
    }
    for key in ("size_bytes", "latency_ms_batch1", "latency_ms_batch64"):
        summary[key] = {"float": base.get(key), "variant": made.get(key), "ratio": _ratio(made.get(key), base.get(key))}
    return summary


def variant_panel(variants, *, queue_is_live) -> dict:
    """The model page's variants panel: each variant with its summary, the metric columns, whether to poll,
    the queues a waiting variant has no live worker on, and the made ones (to register or predict with)."""
    return {
        "variants": [(variant, variant_summary(variant)) for variant in variants],
        "variant_metric_names": sorted({name for variant in variants
                                        for name in variant.figures.get("variant", {}).get("metrics", {})}),
        "variants_active": any(variant.is_active for variant in variants),
        "variant_queues_without_worker": sorted({variant.queue for variant in variants if variant.status ==
                                                 JobStatus.QUEUED and not queue_is_live(variant.queue)}),
        "made_variants": (made := [variant for variant in variants if variant.status == JobStatus.COMPLETED]),
        "tflite_made": any(variant.is_tflite for variant in made),
    }


def made_by(model, variant, *, sentence_start: bool = False) -> str:
    """What a registry version or a prediction runs, for its message: the model, or one of its variants."""
    if variant is None:
        return str(model)
    return f"{'The' if sentence_start else 'the'} {variant.get_method_display()} variant of {model}"
