from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from experiments.forms.datasets import BundledDatasetForm, DatasetUploadForm
from experiments.models import Dataset
from experiments.presentation import dataset_examples
from experiments.selectors.artifacts import artifact_copy_to_path
from experiments.selectors.datasets import team_datasets
from experiments.services.datasets import DatasetError, dataset_create_bundled, dataset_create_upload
from experiments.views.access import editor_required, get_dataset_for_user, team_required


def _samples(dataset) -> str:
    return {"image": "images", "text": "texts", "sequence": "sequences"}.get(dataset.kind, "rows")


@team_required
def dataset_list(request):
    form = BundledDatasetForm(request.POST or None)
    if request.method == "POST":
        if not request.membership.can_edit:
            messages.error(request, "Viewers cannot add datasets.")
        elif form.is_valid():
            try:
                dataset = dataset_create_bundled(team=request.team, user=request.user, **form.cleaned_data)
            except DatasetError as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"Added {dataset.name}.")
                return redirect("dataset_detail", dataset_id=dataset.id)
    return render(request, "datasets/list.html", {"datasets": team_datasets(team=request.team), "form": form})


@editor_required
def dataset_upload(request):
    form = DatasetUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            dataset = dataset_create_upload(
                team=request.team, user=request.user, filename=upload.name, data=upload, size=upload.size,
                limit_mb=settings.UPLOAD_MAX_MB, options=form.upload_options(),
                **{k: form.cleaned_data[k] for k in ("name", "val_fraction", "test_fraction", "seed")},
            )
        except DatasetError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Uploaded {dataset.name}: {dataset.n_rows} {_samples(dataset)}.")
            for warning in dataset.details.get("warnings", []):
                messages.warning(request, warning)
            return redirect("dataset_detail", dataset_id=dataset.id)
    return render(request, "datasets/upload.html", {"form": form, "max_mb": settings.UPLOAD_MAX_MB})


@team_required
def dataset_detail(request, dataset_id: int):
    dataset = get_dataset_for_user(request, dataset_id)
    total = sum(dataset.class_counts.values()) or 1
    # In label order: jsonb sorts an object's keys by length, so class_counts alone would not.
    counts = [(name, dataset.class_counts.get(name, 0)) for name in dataset.classes]
    balance = [(name, count, round(100 * count / total, 1)) for name, count in counts]
    columns = []
    if dataset.preview:
        # PostgreSQL's jsonb does not keep key order: show the file's column order (or the
        # image or sequence summary), the target last.
        keys = dataset.preview[0].keys()
        features = [name for name in dataset.feature_names if name in keys]
        summary = [key for key in ("image", "sequence") if key in keys and key not in features]
        columns = [*features, *summary, *sorted(set(keys) - set(features) - set(summary))]
    examples = dataset_examples.shown_classes(dataset) if dataset.kind == Dataset.Kind.IMAGE else []
    return render(request, "datasets/detail.html", {
        "dataset": dataset, "balance": balance, "preview_columns": columns,
        "preview_rows": [[row.get(c) for c in columns] for row in dataset.preview],
        "examples": examples, "examples_per_class": dataset_examples.EXAMPLES_PER_CLASS,
        "example_height": dataset_examples.THUMBNAIL_SIDE, "example_width": dataset_examples.strip_width(),
    })


@require_GET
@team_required
def dataset_examples_png(request, dataset_id: int, class_index: int):
    """One class's example images as a PNG strip; drawn once, then read from disk."""
    dataset = get_dataset_for_user(request, dataset_id)
    if dataset.kind != Dataset.Kind.IMAGE or class_index >= len(dataset_examples.shown_classes(dataset)):
        raise Http404("This dataset has no example images for that class.")
    png = dataset_examples.class_examples_png(
        dataset, class_index, copy_arrays=lambda path: artifact_copy_to_path(artifact=dataset.arrays, path=path))
    response = HttpResponse(png, content_type="image/png")
    # A dataset's arrays never change; private: another team must not get it from a shared cache.
    response["Cache-Control"] = "private, max-age=86400"
    return response
