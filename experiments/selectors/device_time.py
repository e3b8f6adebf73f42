"""What a team's trials and jobs cost in device time: each ended trial's wall time times the devices
it held, and each ended job's runs the same way (every attempt), summed by calendar month (of the
end) and device kind, newest month first."""

from django.db.models import Sum
from django.db.models.functions import TruncMonth

from experiments.models import EnsembleMember, Team, TrainedModel, Trial


def _by_month(rows, team_path: str, team: Team):
    return (rows.filter(**{team_path: team.id}, device_seconds__isnull=False, finished__isnull=False)
            .annotate(month=TruncMonth("finished")).order_by().values("month", "device_kind")
            .annotate(seconds=Sum("device_seconds")))


def team_device_seconds_by_month(*, team: Team, kinds=(), months: int = 12) -> list[dict]:
    """`kinds`: the job kinds to count besides trials (services/job_kinds.py's JOB_KINDS values)."""
    by_month: dict = {}
    sources = [(Trial.objects.all(), "study__team_id")] + [(kind.table.objects.all(), kind.team) for kind in kinds]
    for rows, team_path in sources:
        for row in _by_month(rows, team_path, team):
            kinds = by_month.setdefault(row["month"], {})
            kinds[row["device_kind"]] = kinds.get(row["device_kind"], 0.0) + row["seconds"]
    return [{"month": month, "by_kind": kinds, "total": sum(kinds.values())}
            for month, kinds in sorted(by_month.items(), reverse=True)[:months]]


def device_seconds_by_team() -> dict[tuple[int, str], float]:
    """Every team's ended trials' device time by (team id, device kind): /metrics's trial counter."""
    rows = (Trial.objects.filter(device_seconds__isnull=False).order_by().values("study__team_id", "device_kind")
            .annotate(seconds=Sum("device_seconds")))
    return {(row["study__team_id"], row["device_kind"]): row["seconds"] for row in rows}


def job_device_seconds_by_team(*, kinds) -> dict[tuple[int, str, str], float]:
    """Every team's jobs' device time by (team id, job kind, device kind): /metrics's job counter.
    `kinds`: services/job_kinds.py's JOB_KINDS values."""
    found = {}
    for kind in kinds:
        rows = (kind.table.objects.filter(device_seconds__isnull=False).order_by().values(kind.team, "device_kind")
                .annotate(seconds=Sum("device_seconds")))
        for row in rows:
            found[(row[kind.team], kind.name, row["device_kind"])] = row["seconds"]
    return found


def model_lineage_device_seconds(model) -> float | None:
    """Device time of everything that made a trained model: its own job's runs, the trial it came
    from, and for an ensemble its members' lineages (a member model's own job and trial, or a
    member trial), each model and trial counted once however many paths lead to it. A query per
    level of nesting, then one per table. None when none of it has a figure yet."""
    models, trials = {model.pk}, set()
    frontier = {model.pk}
    while frontier:
        rows = TrainedModel.objects.filter(pk__in=frontier).values_list("trial_id", flat=True)
        trials.update(trial for trial in rows if trial)
        members = EnsembleMember.objects.filter(ensemble_id__in=frontier).values_list("model_id", "trial_id")
        frontier = set()
        for member_model, member_trial in members:
            if member_model and member_model not in models:
                models.add(member_model)
                frontier.add(member_model)
            elif member_trial:
                trials.add(member_trial)
    parts = [*TrainedModel.objects.filter(pk__in=models).values_list("device_seconds", flat=True),
             *Trial.objects.filter(pk__in=trials).values_list("device_seconds", flat=True)]
    known = [part for part in parts if part is not None]
    return sum(known) if known else None
