"""Create the demo team, its login and a bundled dataset (idempotent)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from experiments.models import Dataset, Team
from experiments.services.datasets import dataset_create_bundled
from experiments.services.teams import membership_add

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "tuneboard-demo"
DEMO_TEAM = "Demo team"


class Command(BaseCommand):
    help = "Create the demo team, user and bundled datasets of every kind if they do not exist."

    def handle(self, *args, **options):
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
