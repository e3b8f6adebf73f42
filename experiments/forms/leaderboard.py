"""The leaderboard's ranking metric."""

from django import forms

from experiments.forms.checks import FormChecks
from experiments.presentation.ranking_rule import metric_direction


class RankingForm(FormChecks, forms.Form):
    """The team's ranking metric, among the test metrics its models record."""

    ranking_metric = forms.ChoiceField(label="Rank by", required=False)

    def __init__(self, *args, recorded: list[str], defaults: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["ranking_metric"].choices = [("", f"Default ({defaults})")] + [
            (m, f"test {m} ({'higher' if metric_direction(m) == 'max' else 'lower'} is better)") for m in recorded]

