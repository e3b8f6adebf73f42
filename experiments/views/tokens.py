from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from experiments.forms.checks import FormChecks
from experiments.models import ApiToken, Membership
from experiments.services.api_tokens import MAX_DAYS, ApiTokenError, api_token_create, api_token_revoke


class ApiTokenForm(FormChecks, forms.Form):
    name = forms.CharField(max_length=100, strip=True, error_messages={
        "required": "Give the token a name, e.g. the machine or script that will use it."})
    team = forms.TypedChoiceField(coerce=int, label="Team", help_text="The one team this token acts in.")
    role = forms.ChoiceField(choices=Membership.Role.choices, label="Role at most",
                             help_text="It never acts with more than your own role in the team.")
    days = forms.IntegerField(required=False, min_value=1, max_value=MAX_DAYS, label="Expires after (days)",
                              help_text="Empty: never.")

    def __init__(self, *args, memberships, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [(m.team_id, m.team.name) for m in memberships]


@login_required
def api_tokens(request):
    """The user's personal API tokens: create (shown once), list, revoke."""
    new_token = None
    memberships = list(Membership.objects.filter(user=request.user).select_related("team").order_by("team__name"))
    current = getattr(request, "membership", None)
    form = ApiTokenForm(memberships=memberships, initial={
        "team": current.team_id if current else None, "role": current.role if current else Membership.Role.VIEWER})
    if request.method == "POST" and "revoke" in request.POST:
        try:
            api_token_revoke(user=request.user, token_key=request.POST["revoke"])
        except ApiTokenError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, "Token revoked; requests with it are refused from now on.")
        return redirect("api_tokens")
    if request.method == "POST":
        form = ApiTokenForm(request.POST, memberships=memberships)
        if form.is_valid():
            data = form.cleaned_data
            try:
                _, new_token = api_token_create(user=request.user, name=data["name"], team_id=data["team"],
                                                role=data["role"], days=data["days"])
            except ApiTokenError as exc:
                form.add_error(None, str(exc))
            else:
                form = ApiTokenForm(memberships=memberships, initial={"team": data["team"], "role": data["role"]})
    tokens = ApiToken.objects.filter(user=request.user).select_related("team").order_by("-created")
    return render(request, "account/tokens.html", {"tokens": tokens, "new_token": new_token, "form": form,
                                                   "has_teams": bool(memberships)})


