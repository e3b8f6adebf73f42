"""The team page's forms: a new team, inviting someone, a member's role, and signing up from an
invitation."""

from django import forms
from django.contrib.auth.forms import UserCreationForm

from experiments.forms.checks import FormChecks
from experiments.forms.fields import no_control_characters
from experiments.models import Membership

ROLE_HELP = "Owners manage members; editors create and run; viewers only look."


class AddMemberForm(FormChecks, forms.Form):
    identifier = forms.CharField(label="E-mail address or username", max_length=254)
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.EDITOR, help_text=ROLE_HELP)


class RoleForm(FormChecks, forms.Form):
    role = forms.ChoiceField(choices=Membership.Role.choices)


class TeamForm(FormChecks, forms.Form):
    name = forms.CharField(label="Team name", max_length=100, validators=[no_control_characters])


class InvitationSignUpForm(FormChecks, UserCreationForm):
    """Username and password (checked by the configured password validators); the e-mail
    address is the invited one."""

    def __init__(self, *args, email: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.instance.email = email  # so validators comparing the password to it see it
