from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from experiments.models import ApiToken
from experiments.services.api_tokens import ApiTokenError, api_token_create, api_token_revoke


def _days(raw: str) -> int | None:
    raw = raw.strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 6:
        raise ApiTokenError(f"Expiry must be a whole number of days, not {raw!r}.")
    return int(raw)


@login_required
def api_tokens(request):
    """The user's personal API tokens: create (shown once), list, revoke."""
    new_token = None
    error = None
    if request.method == "POST":
        try:
            if "revoke" in request.POST:
                api_token_revoke(user=request.user, token_key=request.POST["revoke"])
                messages.success(request, "Token revoked; requests with it are refused from now on.")
                return redirect("api_tokens")
            token, new_token = api_token_create(user=request.user, name=request.POST.get("name", ""),
                                                days=_days(request.POST.get("days", "")))
        except ApiTokenError as exc:
            error = str(exc)
    tokens = ApiToken.objects.filter(user=request.user).order_by("-created")
    return render(request, "account/tokens.html", {"tokens": tokens, "new_token": new_token, "error": error,
                                                   "posted": request.POST})
