"""The batch-prediction form (pages and API bind the same one): the model or registry reference and the inputs,
parsed here by the dataset readers so a bad file is refused before anything is stored."""

import csv
import io
import zipfile

from django import forms
from django.conf import settings

from experiments.datasets.core import DatasetError, check_upload_size
from experiments.datasets.csv_table import csv_problem
from experiments.datasets.inputs import parse_model_inputs
from experiments.forms.checks import FormChecks
from experiments.selectors.predictions import model_input_spec
from experiments.selectors.registry import RegistryReferenceError, registry_reference_resolve
from experiments.selectors.trained_models import team_model
from experiments.selectors.variants import model_variant
from experiments.services.datasets import dataset_limits
from experiments.services.job_kinds import model_on_jax
from experiments.services.predictions import prediction_model_problem
from experiments.tuning.bounds import MAX_FILENAME_CHARS, parse_id

# "Try it" shows its predictions on the page: a few rows, not a file's worth.
TRY_MAX_ROWS = 100


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files from one input (images dropped on the "Try it" box)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        files = data if isinstance(data, list | tuple) else [data] if data else []
        return [super(MultipleFileField, self).clean(file, initial) for file in files]


def _typed_csv(text: str, spec) -> bytes:
    """What was typed in the "Try it" box as the CSV the readers take: rows of feature values
    (a header line naming the features is optional), or one text a line."""
    lines = [line for line in text.splitlines() if line.strip()]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if spec.kind == "text":
        writer.writerow(spec.feature_names[:1])
        writer.writerows([line.strip()] for line in lines)
        return buffer.getvalue().encode()
    # The header written as CSV (a feature named `a,b` or `say "x"` is quoted), and a typed header
    # line recognised however it was quoted.
    writer.writerow(spec.feature_names)
    try:
        first = [cell.strip() for cell in next(csv.reader([lines[0]]))] if lines else None
    except csv.Error as exc:  # a value over the csv module's field limit (131,072 characters)
        raise DatasetError(f"The typed rows could not be read as CSV: {csv_problem(exc)}.") from None
    if first == spec.feature_names:
        lines = lines[1:]
    return (buffer.getvalue() + "".join(line + "\n" for line in lines)).encode()


def _images_zip(files) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for i, file in enumerate(files):
            archive.writestr(f"{i + 1:03d}-{file.name}", file.read())
    return buffer.getvalue()


class PredictionForm(FormChecks, forms.Form):
    model = forms.CharField(required=False, max_length=20, label="Model id",
                            help_text="A trained model or ensemble of this team.")
    reference = forms.CharField(required=False, max_length=140, label="Registry reference",
                                help_text="Or a registered model's alias or version: name@alias (e.g. "
                                "digits@production) or name/version; resolved when you ask.")
    file = forms.FileField(required=False, label="Inputs", help_text=(
        "Inputs without labels: a CSV of the model's feature columns, a zip or NPZ of images of the model's "
        "size, a CSV with one column of texts under a header line (its first line is the header, never a "
        "text), or an NPZ of sequences (array x)."))
    variant = forms.CharField(required=False, max_length=20, label="Quantized variant", help_text=(
        "Predict with one of the model's made quantized variants (its id) instead of the float model; a registry "
        "version that is a variant predicts with it."))
    rows = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}), label="Rows or texts",
                           help_text="Try it: a few CSV rows of feature values, or one text a line.")
    images = MultipleFileField(required=False, label="Images", help_text="Try it: drop a few images.")

    def __init__(self, *args, team=None, fixed_model=None, is_try: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.team, self.fixed_model, self.is_try = team, fixed_model, is_try
        self.fields["file"].help_text += f" At most {settings.UPLOAD_MAX_MB} MB."

    def _target(self, data):
        """(model, requested_as, registry version) from the fixed model, an id or a reference."""
        if self.fixed_model is not None:
            return self.fixed_model, "", None
        model_id, reference = (data.get("model") or "").strip(), (data.get("reference") or "").strip()
        if bool(model_id) == bool(reference):
            raise forms.ValidationError("Give a model or a registry reference (name@alias)"
                                        + (", not both." if model_id else "."))
        if reference:
            try:
                version = registry_reference_resolve(team=self.team, reference=reference)
            except RegistryReferenceError as exc:
                raise forms.ValidationError({"reference": str(exc)}) from None
            return version.trained_model, reference, version
        pk = parse_id(model_id)
        model = team_model(team=self.team, model_id=pk) if pk is not None else None
        if model is None:
            raise forms.ValidationError({"model": f"There is no model {model_id} in this team."})
        return model, "", None

    def _upload(self, data, spec):
        """(filename, data) of the inputs, whichever way they came."""
        file, rows, images = data.get("file"), (data.get("rows") or "").strip(), data.get("images") or []
        given = [bool(file), bool(rows) and self.is_try, bool(images) and self.is_try]
        if sum(given) != 1:
            raise forms.ValidationError("Upload one file of inputs." if not self.is_try else
                                        "Type a few rows or texts, or drop a few images (one of them).")
        if file:
            if len(file.name) > MAX_FILENAME_CHARS:
                raise forms.ValidationError({"file": f"The file name is too long ({len(file.name)} characters; at "
                                                     f"most {MAX_FILENAME_CHARS}): rename the file."})
            check_upload_size(file.size, settings.UPLOAD_MAX_MB)
            return file.name, file
        if rows:
            if spec.kind not in ("tabular", "text"):
                raise forms.ValidationError(f"This model takes {spec.kind} inputs: drop images or upload a file.")
            return "typed.csv", _typed_csv(rows, spec)
        if spec.kind != "image":
            raise forms.ValidationError(f"This model takes {spec.kind} inputs, not images.")
        return "images.zip", _images_zip(images)

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        model, requested_as, version = self._target(data)
        if problem := prediction_model_problem(model):
            raise forms.ValidationError(problem)
        variant = self._variant(model, (data.get("variant") or "").strip(), version)
        spec = model_input_spec(model=model)
        try:
            filename, upload = self._upload(data, spec)
            inputs = parse_model_inputs(filename, upload, spec=spec, limits=dataset_limits())
        except DatasetError as exc:
            raise forms.ValidationError(str(exc)) from None
        if self.is_try and inputs.rows > TRY_MAX_ROWS:
            raise forms.ValidationError(f"Try it predicts at most {TRY_MAX_ROWS} rows ({inputs.rows} given); "
                                        "upload them as a batch prediction instead.")
        data.update(target=model, requested_as=requested_as, registry_version=version, inputs=inputs,
                    filename=filename, variant=variant)
        return data

    @staticmethod
    def _variant(model, given: str, version):
        """The made variant to predict with: the one asked for, or the registry version's; None for the float model."""
        variant = version.variant if version is not None and version.variant_id else None
        if given:
            pk = parse_id(given)
            variant = model_variant(model=model, variant_id=pk) if pk is not None else None
            if variant is None or variant.status != variant.Status.COMPLETED:
                raise forms.ValidationError({"variant": f"Model {model} has no made quantized variant {given}."})
        if variant is not None and variant.is_tflite and model_on_jax(model):
            raise forms.ValidationError({"variant": (
                f"Model {model} trained on JAX: its predictions run on a JAX worker, which has no TFLite runtime; "
                "predict with its Keras variant or the float model.")})
        return variant

    def request_kwargs(self) -> dict:
        """What services.predictions.prediction_request takes from the form."""
        data = self.cleaned_data
        return {"model": data["target"], "inputs": data["inputs"], "filename": data["filename"],
                "requested_as": data["requested_as"], "registry_version": data["registry_version"],
                "is_try": self.is_try, "variant": data["variant"]}
