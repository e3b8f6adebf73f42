from django.contrib import messages
from django.shortcuts import redirect, render

from experiments.presentation.comparison import ComparisonError, parse_study_ids
from experiments.selectors.studies import studies_compared
from experiments.views.access import get_studies_for_user, team_required


@team_required
def studies_compare(request):
    """Two to four studies of one dataset: histories on one chart, best trials side by side,
    hyperparameter importance. A refused selection goes back to the list, which says why."""
    try:
        studies = get_studies_for_user(request, parse_study_ids(request.GET.getlist("studies")))
        compared = studies_compared(studies=studies)
    except ComparisonError as exc:
        messages.error(request, str(exc))
        return redirect("study_list")
    chart = {"objectives": compared["objectives"], "studies": [
        {key: s[key] for key in ("id", "name", "objective_metric", "objective_direction", "history")}
        for s in compared["studies"]]}
    return render(request, "studies/compare_studies.html", {"dataset": studies[0].dataset, "chart": chart, **compared})
