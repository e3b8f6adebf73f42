"""Bootstrap a deployment: a team and its first owner, without the admin or a published password."""

import getpass
import os
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from experiments.services.accounts import account_create
from experiments.services.memberships import team_add_owner
from experiments.services.teams import TeamError

PASSWORD_VARIABLE = "TUNEBOARD_OWNER_PASSWORD"


class Command(BaseCommand):
    help = ("Make USER an owner of the team NAME, creating the team if it does not exist. With --create-user, "
            "create the user first (password from --password, the environment variable "
            f"{PASSWORD_VARIABLE}, or a prompt).")

    def add_arguments(self, parser):
        parser.add_argument("name", help="The team's name.")
        parser.add_argument("--owner", required=True, metavar="USER", help="Username of the team's owner.")
        parser.add_argument("--create-user", action="store_true",
                            help="Create the owner's account if it does not exist.")
        parser.add_argument("--email", default="", help="The new account's e-mail address (for password resets).")
        parser.add_argument("--password", default=None,
                            help=f"The new account's password (else {PASSWORD_VARIABLE}, else a prompt). It shows "
                                 "up in the shell history and process list: prefer the variable or the prompt.")
        parser.add_argument("--no-input", "--noinput", action="store_false", dest="interactive",
                            help="Never prompt; fail when no password is given.")

    def handle(self, *args, name, owner, create_user, email, password, interactive, **options):
        User = get_user_model()
        user = User.objects.filter(username=owner).first()
        if user is None and not create_user:
            raise CommandError(f"No user named {owner!r}. Pick an existing username, or add --create-user "
                               "(with --email) to create the account.")
        if user is None:
            user = self._create_user(owner, email, password, interactive)
            self.stdout.write(f"Created the user {owner}.")
        elif create_user:
            self.stdout.write(f"The user {owner} already exists; their password and e-mail are unchanged.")
        try:
            team, created = team_add_owner(name=name, user=user)
        except TeamError as exc:
            raise CommandError(str(exc)) from None
        if created:
            self.stdout.write(self.style.SUCCESS(f"Created the team {team.name} with {owner} as its owner."))
        else:
            self.stdout.write(self.style.SUCCESS(f"{owner} is now an owner of the existing team {team.name}."))

    def _create_user(self, username: str, email: str, password: str | None, interactive: bool):
        User = get_user_model()
        candidate = User(username=username, email=email)
        password = password if password is not None else os.environ.get(PASSWORD_VARIABLE)
        if password is None:
            if not (interactive and sys.stdin.isatty()):
                raise CommandError(f"No password for the new user {username!r}: pass --password, set "
                                   f"{PASSWORD_VARIABLE}, or run the command in a terminal to be prompted.")
            password = self._prompt_password(candidate)
        try:
            validate_password(password, candidate)
        except ValidationError as exc:
            raise CommandError(f"The password for {username!r} is not accepted: {' '.join(exc.messages)}") from None
        try:
            return account_create(username=username, email=email, password=password)
        except TeamError as exc:
            raise CommandError(str(exc)) from None

    def _prompt_password(self, candidate) -> str:
        while True:
            password = getpass.getpass(f"Password for {candidate.username}: ")
            if password != getpass.getpass("Password (again): "):
                self.stderr.write("The two passwords differ; try again.")
                continue
            try:
                validate_password(password, candidate)
            except ValidationError as exc:
                self.stderr.write(" ".join(exc.messages))
                continue
            return password
