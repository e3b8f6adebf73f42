"""Accounts an attacker cannot wear down: a wrong current password on /password/change/ counts as
a failed login of that user from that address (a stolen session cannot guess its way to a new
password, even while /login/ is locked); password-reset mails are throttled per address and per
client, with the same answer either way; the embedded database and artifact folder are the
owner's alone."""

import stat

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from experiments.models import PasswordResetRequest
from tests.conftest import PASSWORD
from tests.web.fresh_process import run_in_fresh_process
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db

LOCKED = "Too many failed attempts; try again in"


def change(client, old: str, new: str = "a brand new passphrase", **headers):
    return client.post(reverse("password_change"), {"old_password": old, "new_password1": new,
                                                    "new_password2": new}, **headers)


def test_wrong_current_passwords_lock_password_change_and_the_right_one_is_then_refused(alice_client, alice,
                                                                                       settings):
    limit = settings.AXES_FAILURE_LIMIT
    for _ in range(limit - 1):
        response = change(alice_client, "a wrong guess")
        assert response.status_code == 200 and LOCKED not in page_text(response)

    locked = change(alice_client, "a wrong guess")
    assert locked.status_code == 429 and LOCKED in page_text(locked)

    refused = change(alice_client, PASSWORD)
    assert refused.status_code == 429 and LOCKED in page_text(refused)
    alice.refresh_from_db()
    assert alice.check_password(PASSWORD), "the password did not change"


def test_password_change_guesses_count_towards_the_login_lockout(alice_client, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        change(alice_client, "a wrong guess")
    login = Client().post(reverse("login"), {"username": "alice", "password": PASSWORD})
    assert login.status_code == 429 and LOCKED in page_text(login)


def test_a_locked_login_locks_password_change_too(alice_client, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        Client().post(reverse("login"), {"username": "alice", "password": "wrong"})
    response = change(alice_client, PASSWORD)
    assert response.status_code == 429 and LOCKED in page_text(response)


def test_what_was_typed_is_never_stored_with_the_failures(alice_client):
    from axes.models import AccessAttempt

    change(alice_client, "my-secret-guess-123", new="another-secret-456")
    stored = " ".join(str(v) for v in AccessAttempt.objects.values().get().values())
    assert "my-secret-guess-123" not in stored and "another-secret-456" not in stored


def test_other_users_and_addresses_are_not_locked(alice_client, bob, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        change(alice_client, "wrong")
    bob_client = Client()
    bob_client.force_login(bob)
    assert change(bob_client, "wrong").status_code == 200  # bob: his own count
    other = Client(REMOTE_ADDR="10.9.8.7")
    assert other.post(reverse("login"), {"username": "alice", "password": PASSWORD}).status_code == 302


@pytest.fixture
def alice_with_email(alice):
    alice.email = "alice@example.com"
    alice.save(update_fields=["email"])
    return alice


def reset(client, email: str):
    return client.post(reverse("password_reset"), {"email": email})


def test_reset_mails_are_throttled_per_address_with_the_same_answer(client, alice_with_email, settings):
    settings.PASSWORD_RESETS_PER_ADDRESS = 3
    answers = [reset(Client(REMOTE_ADDR=f"10.0.0.{i}"), "alice@example.com") for i in range(15)]
    assert len(mail.outbox) == 3, "at most 3 mails an hour to one address, whoever asks"
    assert {(a.status_code, a["Location"]) for a in answers} == {(302, reverse("password_reset_done"))}


def test_reset_requests_are_throttled_per_client_with_the_same_answer(client, django_user_model, settings):
    settings.PASSWORD_RESETS_PER_CLIENT = 4
    for i in range(8):
        django_user_model.objects.create_user(f"u{i}", email=f"u{i}@example.com", password=PASSWORD)
    answers = [reset(client, f"u{i}@example.com") for i in range(8)]
    assert len(mail.outbox) == 4, "one client reaches at most 4 addresses an hour"
    assert {(a.status_code, a["Location"]) for a in answers} == {(302, reverse("password_reset_done"))}
    assert not PasswordResetRequest.objects.filter(email_digest__contains="@").exists(), "addresses kept hashed"


def test_an_unknown_address_counts_and_answers_the_same(client, alice_with_email):
    assert reset(client, "nobody@example.com")["Location"] == reverse("password_reset_done")
    assert reset(client, "alice@example.com")["Location"] == reverse("password_reset_done")
    assert len(mail.outbox) == 1 and PasswordResetRequest.objects.count() == 2


FILE_MODES = r"""
import django
django.setup()
import json, stat
from pathlib import Path
from django.conf import settings
from django.core.management import call_command
call_command("migrate", verbosity=0)
from experiments.models import Artifact, Team
from experiments.services.artifacts import artifact_create
import io
team = Team.objects.create(name="t")
artifact = artifact_create(team=team, kind=Artifact.Kind.MODEL, filename="m.keras", fileobj=io.BytesIO(b"x" * 10))
db = Path(settings.DATABASES["default"]["NAME"])
stored = list(Path(settings.ARTIFACT_DIR).rglob("*"))
mode = lambda p: stat.S_IMODE(p.stat().st_mode)
print("RESULT:" + json.dumps({"db": mode(db), "wal": [mode(p) for p in db.parent.glob(db.name + "-*")],
      "artifacts": mode(Path(settings.ARTIFACT_DIR)), "files": sorted({mode(p) for p in stored if p.is_file()}),
      "dirs": sorted({mode(p) for p in stored if p.is_dir()})}))
"""


def test_the_embedded_database_and_artifacts_are_readable_by_their_owner_only(tmp_path):
    result = run_in_fresh_process(FILE_MODES, {"TUNEBOARD_VAR_DIR": str(tmp_path / "var")}, timeout=180)
    assert result["db"] == 0o600 and all(m == 0o600 for m in result["wal"]), result
    assert result["artifacts"] == 0o700 and result["files"] == [0o600], result
    assert all(m == 0o700 for m in result["dirs"]), result


def test_an_older_database_file_is_tightened_at_start(tmp_path):
    var = tmp_path / "var"
    var.mkdir()
    var.chmod(0o755)
    (var / "tuneboard.sqlite3").touch()
    (var / "tuneboard.sqlite3").chmod(0o644)
    result = run_in_fresh_process(FILE_MODES, {"TUNEBOARD_VAR_DIR": str(var)}, timeout=180)
    assert result["db"] == 0o600
    assert stat.S_IMODE(var.stat().st_mode) == 0o755, "a folder a person named is left as they made it"
