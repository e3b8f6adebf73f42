from django.contrib import messages
from django.shortcuts import redirect, render

from experiments.bounds import MAX_SEED, InputError, bounded_int
from experiments.selectors import ensemble_candidates
from experiments.services.ensembles import MAX_ROUNDS, METHODS, EnsembleError, ensemble_create, ensemble_members_resolve
from experiments.services.trained_models import ModelRequestError
from experiments.views.access import editor_required

METHOD_CHOICES = [(m.value, m.label.removeprefix("Ensemble: ")) for m in METHODS]


def _int(request, name: str, default: int, high: int) -> int:
    raw = request.POST.get(name, "").strip()
    if not raw:
        return default
    try:
        return bounded_int(raw, label=name.capitalize(), low=0, high=high)
    except InputError as exc:
        raise EnsembleError(str(exc)) from None


@editor_required
def ensemble_new(request):
    error = None
    if request.method == "POST":
        try:
            ensemble = ensemble_create(
                team=request.team, user=request.user,
                members=ensemble_members_resolve(team=request.team, keys=request.POST.getlist("members")),
                method=request.POST.get("method", ""), rounds=_int(request, "rounds", 50, MAX_ROUNDS),
                seed=_int(request, "seed", 0, MAX_SEED), name=request.POST.get("name", ""),
            )
        except ModelRequestError as exc:  # EnsembleError, or a bad name
            error = str(exc)
        else:
            # What happened, not progress: the model page's live part shows the build and its end.
            messages.success(request, f"Saved the ensemble {ensemble}.")
            return redirect("model_detail", model_id=ensemble.id)
    picked = set(request.POST.getlist("members"))
    include_pruned = request.GET.get("include_pruned") == "1"
    groups = ensemble_candidates(team=request.team, include_pruned=include_pruned)
    for group in groups:
        for kind in ("model", "trial"):
            for candidate in group[f"{kind}s"]:
                candidate.pick_value = f"{kind}:{candidate.id}"
                candidate.picked = candidate.pick_value in picked
    return render(request, "ensembles/new.html", {
        "groups": groups, "methods": METHOD_CHOICES, "error": error, "posted": request.POST,
        "include_pruned": include_pruned,
    })
