"""Create the demo team, its login and a bundled dataset (idempotent). For a local demo only:
the login's password is published in the README."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from experiments.models import Dataset, Team
from experiments.services.datasets import dataset_create_bundled
from experiments.services.memberships import membership_add

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "tuneboard-demo"
DEMO_TEAM = "Demo team"
CONFIRM_FLAG = "--i-know-this-is-not-production"


class Command(BaseCommand):
    help = ("Create the demo team, user and bundled datasets of every kind if they do not exist. Local demos only: "
            f"runs when DEBUG is on or with {CONFIRM_FLAG}.")

    def add_arguments(self, parser):
        parser.add_argument(CONFIRM_FLAG, action="store_true", dest="not_production",
                            help="Run although DEBUG is off (make run passes it: the embedded mode is a local demo).")

    def handle(self, *args, not_production=False, **options):
        if not (settings.DEBUG or not_production):
            raise CommandError(
                f"seed_demo creates a superuser with the published password {DEMO_USERNAME} / {DEMO_PASSWORD}, "
                "which must never reach a real deployment, so it refuses to run with DEBUG off. For a local demo, "
                f"run it with {CONFIRM_FLAG} (make run does). For a deployment, create a team and its owner with "
                '`manage.py createteam "Research" --owner ada --create-user --email ada@example.com`.'
            )
        User = get_user_model()
        user, created = User.objects.get_or_create(
            username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        team, _ = Team.objects.get_or_create(name=DEMO_TEAM)
        membership_add(team=team, user=user, role="owner")
        # One of each kind, so every hypermodel can be tried at once.
        for name in ("digits", "iris", "digits_images", "reviews", "waves"):
            if not Dataset.objects.filter(team=team, bundled_name=name).exists():
                dataset_create_bundled(team=team, user=user, bundled_name=name)
        self.stdout.write(f"Demo login: {DEMO_USERNAME} / {DEMO_PASSWORD}")
