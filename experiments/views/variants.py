"""A model's quantized variants on its page: asking for one, and downloading it once made."""

from django.contrib import messages
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from experiments.forms.variants import VariantRequestForm
from experiments.models import ModelVariant
from experiments.selectors.variants import model_variant
from experiments.services.trained_models import ModelFileUnavailable
from experiments.services.variants import VariantRequestError, variant_cancel, variant_download, variant_request
from experiments.views.access import editor_required, found_or_404, get_model_for_user, team_required
from experiments.views.trained_models import artifact_response, download_error


@require_POST
@editor_required
def model_variant_request(request, model_id: int):
    model = get_model_for_user(request, model_id)
    form = VariantRequestForm(request.POST, model=model)
    if not form.is_valid():
        messages.error(request, " ".join(" ".join(errors) for errors in form.errors.values()))
    else:
        try:
            variant = variant_request(model=model, method=form.cleaned_data["method"], user=request.user)
        except VariantRequestError as exc:  # the model changed since the form looked (its state, under the lock)
            messages.error(request, str(exc))
            return redirect("model_detail", model_id=model.id)
        messages.success(request, f"{variant.get_method_display()} of {model}: "
                         f"{'made' if variant.status == variant.Status.COMPLETED else 'queued'}; its figures appear "
                         "below beside the float model's.")
    return redirect("model_detail", model_id=model.id)


@team_required
def model_variant_download(request, model_id: int, variant_id: int):
    model = get_model_for_user(request, model_id)
    variant = model_variant(model=model, variant_id=variant_id)
    found_or_404(variant if variant is not None and variant.artifact_id else None, ModelVariant)
    try:
        return artifact_response(variant_download(variant=variant), variant.artifact)
    except ModelFileUnavailable as exc:
        return download_error(request, model, str(exc), status=500)


@require_POST
@editor_required
def model_variant_cancel(request, model_id: int, variant_id: int):
    model = get_model_for_user(request, model_id)
    variant = found_or_404(model_variant(model=model, variant_id=variant_id), ModelVariant)
    if variant_cancel(variant=variant):
        messages.success(request, f"{variant.get_method_display()} of {model} cancelled.")
    else:
        messages.error(request, f"{variant.get_method_display()} of {model} has already ended "
                                f"({variant.get_status_display().lower()}).")
    return redirect("model_detail", model_id=model.id)
