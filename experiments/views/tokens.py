from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from experiments.forms.tokens import ApiTokenForm
from experiments.models import ApiToken, Membership
from experiments.services.api_tokens import ApiTokenError, api_token_create, api_token_revoke


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


