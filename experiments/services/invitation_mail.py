"""Invitation e-mail: the link mailed to the invitee when a delivering mail backend is configured;
otherwise the owner passes it on."""

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail

from experiments.models import Invitation

User = get_user_model()
log = logging.getLogger(__name__)
# Backends that do not deliver: with them the owner copies the link instead.
UNDELIVERED_MAIL_BACKENDS = {
    "django.core.mail.backends.console.EmailBackend",
    "django.core.mail.backends.dummy.EmailBackend",
}


def mail_delivers() -> bool:
    return settings.EMAIL_BACKEND not in UNDELIVERED_MAIL_BACKENDS


def invitation_send_email(*, invitation: Invitation, link: str) -> str:
    """Mail the invitee when a delivering backend is configured and return a sentence for the owner that never reveals
    whether an account exists."""
    if not mail_delivers():
        return "No mail server is configured, so pass the link below on yourself."
    if invitation.email:
        recipients, how = [invitation.email], f"Open this link to sign up or log in and accept:\n{link}"
    else:
        account = User.objects.filter(username__iexact=invitation.username, is_active=True).first()
        recipients = [account.email] if account is not None and account.email else []
        how = f"Log in as {invitation.username} and accept it on your dashboard, or open:\n{link}"
    inviter = invitation.created_by.get_username() if invitation.created_by else "An owner"
    try:
        if recipients:
            send_mail(
                subject=f"Invitation to {invitation.team.name} on Tuneboard",
                message=(f"{inviter} invites you to the team {invitation.team.name} on Tuneboard as "
                         f"{invitation.role}. You join only if you accept.\n\n{how}\n\n"
                         f"The invitation expires on {invitation.expires:%Y-%m-%d %H:%M} UTC.\n"),
                from_email=None, recipient_list=recipients, fail_silently=False,
            )
    except Exception as exc:  # SMTP, DNS, TLS and socket errors all mean the same to the owner
        log.warning("could not e-mail invitation %s: %s", invitation.pk, type(exc).__name__)
        if invitation.email:
            return f"E-mailing {invitation.email} failed: pass the link below on yourself."
    if invitation.email:
        return f"It was e-mailed to {invitation.email}; the link is also below."
    return "Its link is below, for you to pass on if you like."
