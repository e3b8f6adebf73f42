"""Write a team's registry in TF Serving's layout now, in this process (what the serving export
job does on a worker), and say what was written, kept, removed and left out."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from experiments.errors import TuneboardError
from experiments.models import Team
from experiments.presentation.serving_reports import serving_report_lines
from experiments.services.serving_exports import serving_export_here


class Command(BaseCommand):
    help = ("Write the TF Serving layout of a team's registered models (<name>/<version>/ SavedModels and "
            "models.config with the aliases as version labels) into the team's serving folder, or --to DIR.")

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True, metavar="NAME", help="The team's name.")
        parser.add_argument("--to", default=None, metavar="DIR",
                            help="Write into DIR instead of the team's folder under TUNEBOARD_SERVING_DIR.")
        parser.add_argument("--base-path", default=None, metavar="PATH",
                            help="Where TF Serving sees that folder (models.config's base_path prefix), e.g. "
                                 "/models when it is mounted there; default: the folder's own path, or with "
                                 "no --to the one TUNEBOARD_SERVING_BASE_PATH gives.")

    def handle(self, *args, team, to, base_path, **options):
        found = Team.objects.filter(name=team).first()
        if found is None:
            raise CommandError(f"No team named {team!r}.")
        try:
            export = serving_export_here(team=found, folder=Path(to) if to else None, base_path=base_path)
        except (TuneboardError, OSError) as exc:
            raise CommandError(f"The export failed and left the previous layout as it was: {exc}") from exc
        report = export.report
        self.stdout.write(f"Folder: {report['folder']} (TF Serving sees it as {report['base_path']})")
        self.stdout.write("\n".join(serving_report_lines(report)))
