"""The dataset forms: a bundled dataset, or an upload (the page and the API bind the same ones)."""

from django import forms
from django.conf import settings

from experiments.datasets.bundled import BUNDLED
from experiments.forms.checks import FormChecks
from experiments.forms.fields import no_control_characters, seed_field
from experiments.services.datasets import UploadOptions
from experiments.tuning.bounds import MAX_FILENAME_CHARS


def _fraction_field(initial: float) -> forms.FloatField:
    return forms.FloatField(initial=initial, min_value=0.01, max_value=0.9,
                            help_text="Share of the rows, e.g. 0.15.")


class BundledDatasetForm(FormChecks, forms.Form):
    bundled_name = forms.ChoiceField(label="Bundled dataset", choices=[(k, f"{k} — {v}") for k, v in BUNDLED.items()])
    name = forms.CharField(max_length=100, required=False, help_text="Defaults to the dataset's name.",
                           validators=[no_control_characters])
    val_fraction = _fraction_field(0.15)
    test_fraction = _fraction_field(0.15)
    seed = seed_field("Split seed")


class DatasetUploadForm(FormChecks, forms.Form):
    name = forms.CharField(max_length=100, validators=[no_control_characters])
    file = forms.FileField(help_text="CSV with a header row, NPZ with arrays x and y, or a ZIP of images in one "
                           "folder per class.")
    kind = forms.ChoiceField(label="Kind of data", initial="auto", required=False, choices=[
        ("auto", "Detect (ZIP: images; NPZ: by the shape of x; CSV: tabular, text or time series by the fields below)"),
        ("tabular", "Tabular rows"), ("image", "Images"), ("text", "Text"), ("sequence", "Sequences")])
    target_column = forms.CharField(max_length=200, required=False, help_text="CSV only: the column to predict.")
    text_column = forms.CharField(max_length=200, required=False,
                                  help_text="Text CSV: the column holding the texts.")
    window = forms.IntegerField(required=False, min_value=1, max_value=100_000, label="Window length",
                                help_text="Time-series CSV: time steps each sample sees (rows in file order).")
    horizon = forms.IntegerField(initial=1, min_value=1, required=False, max_value=100_000,
                                 help_text="Time-series CSV: how many steps after the window the target is.")
    image_size = forms.CharField(max_length=20, required=False, label="Image size",
                                 help_text="Images: height×width (e.g. 32x32) or one number for squares; "
                                 "empty: the most common size, at most 256.")
    color_mode = forms.ChoiceField(label="Colour mode", initial="auto", required=False, choices=[
        ("auto", "Detect (grayscale when every image is)"), ("grayscale", "Grayscale"), ("rgb", "RGB"),
        ("rgba", "RGBA")])
    task = forms.ChoiceField(choices=[("auto", "Detect"), ("classification", "Classification"),
                                      ("regression", "Regression")], initial="auto")
    val_fraction = _fraction_field(0.15)
    test_fraction = _fraction_field(0.15)
    seed = seed_field("Split seed")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["file"].help_text += f" At most {settings.UPLOAD_MAX_MB} MB."

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if len(upload.name) > MAX_FILENAME_CHARS:
            raise forms.ValidationError(f"The file name is too long ({len(upload.name)} characters; at most "
                                        f"{MAX_FILENAME_CHARS}): rename the file and upload it again.")
        return upload

    def clean_image_size(self):
        text = self.cleaned_data["image_size"].strip().lower().replace("×", "x")
        if not text:
            return None
        parts = text.split("x")
        if len(parts) > 2 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
            raise forms.ValidationError("Write the size as height×width, e.g. 32x32, or one number for squares.")
        height, width = (int(parts[0]), int(parts[-1]))
        if not (4 <= height <= 1024 and 4 <= width <= 1024):
            raise forms.ValidationError("Each side must be from 4 to 1,024 pixels.")
        return height, width

    def upload_options(self):
        data = self.cleaned_data
        return UploadOptions(kind=data["kind"] or "auto", target_column=data["target_column"],
                             text_column=data["text_column"], window=data["window"], horizon=data["horizon"] or 1,
                             image_size=data["image_size"], color_mode=data["color_mode"] or "auto", task=data["task"])
