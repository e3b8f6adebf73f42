"""The registry's pages: the team's registered models, one registered model (versions, aliases,
history with one-click rollback), and registering a model from its page or the leaderboard."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from experiments.forms.registry import AliasForm, AliasRemoveForm, RegisterForm, RollbackForm
from experiments.models import RegisteredModel
from experiments.presentation.variants import made_by
from experiments.selectors.registry import registered_model_detail, team_registered_model, team_registered_models
from experiments.services.registry import (
    RegistryError,
    registry_alias_remove,
    registry_alias_rollback,
    registry_alias_set,
    registry_register,
)
from experiments.views.access import editor_required, found_or_404, get_model_for_user, team_required


def get_registered_model_for_user(request, registered_model_id: int) -> RegisteredModel:
    return found_or_404(team_registered_model(team=request.team, registered_model_id=registered_model_id),
                        RegisteredModel)


def form_message(form) -> str:
    """A refused form's errors in one line for the page's flash (the API returns them per field)."""
    return " ".join(f"{form.fields[name].label or name}: {' '.join(errors)}" for name, errors in form.errors.items())


@team_required
def registry_list(request):
    return render(request, "registry/list.html", {"registered_models": team_registered_models(team=request.team)})


@team_required
def registry_detail(request, registered_model_id: int):
    registered = get_registered_model_for_user(request, registered_model_id)
    detail = registered_model_detail(registered=registered)
    versions = detail["versions"]
    initial = {"alias": "production" if not detail["aliases"] else "staging",
               "version": versions[0].version if versions else ""}
    return render(request, "registry/detail.html", {
        "registered": registered, **detail, "alias_form": AliasForm(initial=initial),
        "metric_names": sorted({name for v in versions for name in v.test_metrics}),
    })


def _act(request, registered: RegisteredModel, form_class, action, done: str):
    """Run a registry write from a posted form: its message on success, the form's or the
    service's refusal otherwise, and back to the registered model's page either way."""
    form = form_class(request.POST)
    if not form.is_valid():
        messages.error(request, form_message(form))
    else:
        try:
            move = action(form.cleaned_data)
        except RegistryError as exc:
            messages.error(request, str(exc))
        else:
            where = f"version {move.to_version.version}" if move.to_version else "removed"
            messages.success(request, done.format(name=registered.name, alias=move.alias, where=where))
    return redirect("registry_detail", registered_model_id=registered.id)


def _alias_view(form_class, action, done: str):
    """An editor's POST-only view: `action(registered, cleaned data, user)` from `form_class`."""

    @require_POST
    @editor_required
    def view(request, registered_model_id: int):
        registered = get_registered_model_for_user(request, registered_model_id)
        return _act(request, registered, form_class, lambda data: action(registered, data, request.user), done)

    return view


registry_alias_set_view = _alias_view(AliasForm, lambda registered, data, user: registry_alias_set(
    registered=registered, alias=data["alias"], version=data["version"], user=user), "{name}@{alias} is now {where}.")
registry_alias_remove_view = _alias_view(AliasRemoveForm, lambda registered, data, user: registry_alias_remove(
    registered=registered, alias=data["alias"], user=user), "{name}@{alias} removed.")
registry_rollback_view = _alias_view(RollbackForm, lambda registered, data, user: registry_alias_rollback(
    registered=registered, move_id=data["move"], user=user), "Rolled back: {name}@{alias} is {where}.")


@require_POST
@editor_required
def model_register(request, model_id: int):
    """The model page's (and the leaderboard's) Register form."""
    model = get_model_for_user(request, model_id)
    form = RegisterForm(request.POST)
    if not form.is_valid():
        messages.error(request, form_message(form))
        return redirect("model_detail", model_id=model.id)
    try:
        version = registry_register(team=request.team, model=model, name=form.cleaned_data["name"],
                                    user=request.user, description=form.cleaned_data["description"],
                                    variant_id=form.cleaned_data["variant"])
    except RegistryError as exc:
        messages.error(request, str(exc))
        return redirect("model_detail", model_id=model.id)
    made_from = made_by(model, version.variant, sentence_start=True)
    messages.success(request, f"{made_from} is now version {version.version} of {version.registered_model.name}.")
    return redirect("registry_detail", registered_model_id=version.registered_model_id)
