from django.contrib import messages
from django.shortcuts import redirect, render

from experiments.forms.ensembles import EnsembleForm
from experiments.selectors.ensembles import ensemble_candidates
from experiments.services.ensembles import ensemble_create
from experiments.services.trained_models import ModelRequestError
from experiments.views.access import editor_required
from experiments.views.predictions import form_message


@editor_required
def ensemble_new(request):
    form = EnsembleForm(request.POST or None, team=request.team)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            ensemble = ensemble_create(team=request.team, user=request.user, members=data["members"],
                                       method=data["method"], rounds=data["greedy_rounds"], seed=data["seed"],
                                       name=data["name"])
        except ModelRequestError as exc:  # EnsembleError, or a bad name
            form.add_error(None, str(exc))
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
    # The fields the page renders with _field.html show their own errors; every other one (the
    # members' checkboxes, the method's radios, the whole form's) goes on top.
    error = form_message(form, shown_by_fields=("greedy_rounds", "seed", "name")) if form.is_bound else None
    return render(request, "ensembles/new.html", {
        "groups": groups, "form": form, "error": error, "include_pruned": include_pruned,
    })
