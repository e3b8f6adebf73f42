"""Bootstrapping a deployment: `createteam` makes a team and its first owner (creating the
account when asked, never without a password), and `seed_demo`, whose password is published,
refuses to run on a deployment (DEBUG off) unless told it is a local demo."""

import io
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from experiments.management.commands import createteam, seed_demo
from experiments.models import Dataset, Membership, Team

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
STRONG = "a long enough password"


def _run(*args, **options) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


@pytest.fixture
def no_terminal(monkeypatch):
    monkeypatch.setattr(createteam.sys, "stdin", io.StringIO())
    monkeypatch.delenv(createteam.PASSWORD_VARIABLE, raising=False)


def test_createteam_makes_a_new_team_with_an_existing_user_as_owner(alice, acme):
    out = _run("createteam", "Research", "--owner", "alice")
    team = Team.objects.get(name="Research")
    assert Membership.objects.get(team=team, user=alice).role == "owner"
    assert "Created the team Research with alice as its owner." in out


def test_createteam_makes_a_user_an_owner_of_an_existing_team(acme, alice, bob):
    out = _run("createteam", "acme", "--owner", "bob")
    assert Membership.objects.get(team=acme, user=bob).role == "owner"
    assert Team.objects.count() == 1
    assert "bob is now an owner of the existing team Acme." in out


def test_createteam_fails_clearly_for_an_unknown_user(db):
    with pytest.raises(CommandError, match="No user named 'ada'. Pick an existing username, or add --create-user"):
        _run("createteam", "Research", "--owner", "ada")
    assert not Team.objects.exists()


def test_createteam_creates_the_owner_with_the_given_password(no_terminal):
    out = _run("createteam", "Research", "--owner", "ada", "--create-user", "--email", "ada@example.com",
               "--password", STRONG)
    ada = get_user_model().objects.get(username="ada")
    assert ada.email == "ada@example.com" and ada.check_password(STRONG)
    assert not ada.is_staff and not ada.is_superuser
    assert Membership.objects.get(user=ada).team.name == "Research"
    assert "Created the user ada." in out


def test_createteam_reads_the_password_from_the_environment(no_terminal, monkeypatch):
    monkeypatch.setenv(createteam.PASSWORD_VARIABLE, STRONG)
    _run("createteam", "Research", "--owner", "ada", "--create-user")
    assert get_user_model().objects.get(username="ada").check_password(STRONG)


def test_createteam_refuses_to_create_a_user_without_a_password_when_not_interactive(no_terminal):
    with pytest.raises(CommandError, match="No password for the new user 'ada': pass --password, set "
                                           "TUNEBOARD_OWNER_PASSWORD, or run the command in a terminal"):
        _run("createteam", "Research", "--owner", "ada", "--create-user")
    assert not get_user_model().objects.filter(username="ada").exists()
    assert not Team.objects.exists()


def test_createteam_never_prompts_with_no_input_even_in_a_terminal(no_terminal, monkeypatch):
    monkeypatch.setattr(createteam.sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(createteam.getpass, "getpass", lambda prompt: pytest.fail("prompted"))
    with pytest.raises(CommandError, match="No password"):
        _run("createteam", "Research", "--owner", "ada", "--create-user", "--no-input")


def test_createteam_prompts_for_the_password_in_a_terminal(no_terminal, monkeypatch):
    answers = iter(["short", "short", STRONG, "typo", STRONG, STRONG])
    monkeypatch.setattr(createteam.sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(createteam.getpass, "getpass", lambda prompt: next(answers))
    _run("createteam", "Research", "--owner", "ada", "--create-user")
    assert get_user_model().objects.get(username="ada").check_password(STRONG)
    assert next(answers, None) is None  # asked again after a too-short and a mistyped one


def test_createteam_rejects_a_password_the_validators_refuse(no_terminal):
    with pytest.raises(CommandError, match="The password for 'ada' is not accepted: This password is too short"):
        _run("createteam", "Research", "--owner", "ada", "--create-user", "--password", "short")
    assert not get_user_model().objects.filter(username="ada").exists()


def test_createteam_rejects_a_bad_email(no_terminal):
    with pytest.raises(CommandError, match="not-an-address is not an e-mail address."):
        _run("createteam", "Research", "--owner", "ada", "--create-user", "--email", "not-an-address",
             "--password", STRONG)
    assert not Team.objects.exists()


def test_createteam_with_create_user_reuses_an_existing_account(alice, acme, no_terminal):
    out = _run("createteam", "Research", "--owner", "alice", "--create-user", "--password", STRONG)
    assert "The user alice already exists; their password and e-mail are unchanged." in out
    alice.refresh_from_db()
    assert not alice.check_password(STRONG)
    assert Membership.objects.get(team__name="Research", user=alice).role == "owner"


def test_seed_demo_refuses_without_debug_and_says_why(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError) as refused:
        _run("seed_demo")
    message = str(refused.value)
    assert "seed_demo creates a superuser with the published password demo / tuneboard-demo" in message
    assert "--i-know-this-is-not-production" in message and "createteam" in message
    assert not get_user_model().objects.exists()


def test_seed_demo_runs_with_the_flag(settings, monkeypatch):
    settings.DEBUG = False
    made = []
    # The bundled datasets are the slow part and tested elsewhere; the refusal is what matters here.
    monkeypatch.setattr(seed_demo, "dataset_create_bundled", lambda **kw: made.append(kw["bundled_name"]))
    out = _run("seed_demo", "--i-know-this-is-not-production")
    demo = get_user_model().objects.get(username=seed_demo.DEMO_USERNAME)
    assert demo.is_superuser and demo.check_password(seed_demo.DEMO_PASSWORD)
    assert Membership.objects.get(user=demo).team.name == seed_demo.DEMO_TEAM
    assert made == ["digits", "iris", "digits_images", "reviews", "waves"]
    assert "Demo login: demo / tuneboard-demo" in out
    assert not Dataset.objects.exists()


def test_seed_demo_runs_when_debug_is_on(settings, monkeypatch):
    settings.DEBUG = True
    monkeypatch.setattr(seed_demo, "dataset_create_bundled", lambda **kw: None)
    _run("seed_demo")
    assert get_user_model().objects.filter(username="demo").exists()


def test_make_run_passes_the_flag_the_embedded_demo_needs_after_making_its_key():
    makefile = (ROOT / "Makefile").read_text()
    run_target = re.search(r"^run:.*?(?=^\S)", makefile, re.MULTILINE | re.DOTALL).group(0)
    assert "bash scripts/run_embedded.sh" in run_target
    script = (ROOT / "scripts" / "run_embedded.sh").read_text()
    key = script.index('SECRET_KEY="${SECRET_KEY:-$(bash scripts/embedded_secret_key.sh)}"')
    export = script.index("export SECRET_KEY")
    migrate = script.index("manage.py migrate --noinput")
    seed = script.index("manage.py seed_demo --i-know-this-is-not-production")
    assert key < export < migrate < seed < script.index("celery -A webapp worker") < script.index("runserver")
