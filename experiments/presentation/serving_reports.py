"""A serving export's report in words, for the registry page and the export_serving command."""


def _versions(names) -> str:
    return ", ".join(names or []) or "none"


def serving_report_lines(report: dict) -> list[str]:
    """What the export wrote, kept, removed and left out (with why), and the labels it served."""
    if not report:
        return []
    lines = [f"Written: {_versions(report.get('written'))}", f"Kept (unchanged): {_versions(report.get('kept'))}",
             f"Removed: {_versions(report.get('removed'))}"]
    for name, labels in sorted((report.get("labels") or {}).items()):
        shown = ", ".join(f"{label} \u2192 {version}" for label, version in sorted(labels.items())) or "no labels"
        lines.append(f"Labels of {name}: {shown}")
    for skipped in report.get("skipped") or []:
        lines.append(f"Left out {skipped.get('version') or skipped.get('model')}: {skipped.get('reason', '')}")
    changed = "rewritten" if report.get("config_changed") else "unchanged"
    lines.append(f"models.config {changed}; {float(report.get('seconds') or 0):.2f} s")
    return lines


REASONS = {"manual": "asked for on the page", "api": "asked for through the API",
           "command": "run by manage.py export_serving"}


def serving_reason_label(reason: str) -> str:
    """Why an export ran, in words: "after iris@production moved" for `alias:iris@production`."""
    reason = reason or "manual"
    if reason.startswith("alias:"):
        return f"after {reason.removeprefix('alias:')} moved"
    return REASONS.get(reason, reason)
