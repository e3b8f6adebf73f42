"""CSV downloads that spreadsheets open safely: a cell a user wrote that starts like a
formula (=, +, -, @) is prefixed with an apostrophe so Excel or Sheets shows it as text."""

import csv

from django.http import HttpResponse

from experiments.tuning.bounds import header_filename

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value):
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_response(filename: str, header: list, rows) -> HttpResponse:
    response = HttpResponse(content_type="text/csv")
    stem, _, suffix = filename.rpartition(".")
    response["Content-Disposition"] = f'attachment; filename="{header_filename(stem, "." + suffix)}"'
    writer = csv.writer(response)
    writer.writerow(header)
    for row in rows:
        writer.writerow([safe_cell(cell) for cell in row])
    return response
