"""Accounts: a plain user account (no staff rights), made by `manage.py createteam` or by signing up
through an invitation."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction

from experiments.services.teams import TeamError

User = get_user_model()


def email_checked(email: str) -> str:
    email = email.strip()
    try:
        validate_email(email)
    except ValidationError:
        raise TeamError(f"{email} is not an e-mail address.") from None
    return email


def account_create(*, username: str, password: str, email: str = ""):
    """A plain account (no staff rights). The caller validates the password."""
    username = (username or "").strip()
    if not username:
        raise TeamError("Choose a username.")
    if User.objects.filter(username__iexact=username).exists():
        raise TeamError(f"The username {username} is taken: choose another.")
    email = email_checked(email) if email else ""
    try:
        with transaction.atomic():
            return User.objects.create_user(username=username, email=email, password=password)
    except IntegrityError:  # taken between the check and the insert
        raise TeamError(f"The username {username} is taken: choose another.") from None
