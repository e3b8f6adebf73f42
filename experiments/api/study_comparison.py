"""Two to four studies of one dataset side by side."""

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.response import Response

from experiments.api.errors import ERRORS, invalid
from experiments.presentation.comparison import ComparisonError, parse_study_ids
from experiments.selectors.studies import studies_compared
from experiments.views.access import get_studies_for_user


class ComparedHistorySerializer(serializers.Serializer):
    number = serializers.ListField(child=serializers.IntegerField(), help_text="Trial numbers (1-based start order).")
    score = serializers.ListField(child=serializers.FloatField(), help_text="Each completed trial's objective.")
    best = serializers.ListField(child=serializers.FloatField(), help_text="The best objective so far.")
    trial = serializers.ListField(child=serializers.IntegerField(), help_text="Each point's trial id.")
    total = serializers.IntegerField(help_text="Completed trials with a score.")
    shown = serializers.IntegerField(help_text="Points kept (long histories are downsampled, improvements kept).")


class ComparedTrialSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    number = serializers.IntegerField()
    label = serializers.CharField()
    score = serializers.FloatField()
    metrics = serializers.DictField(child=serializers.FloatField(allow_null=True))
    hyperparameters = serializers.DictField(child=serializers.JSONField())


class ImportanceRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    importance = serializers.FloatField()


class ImportanceSerializer(serializers.Serializer):
    rows = ImportanceRowSerializer(many=True)
    trials = serializers.IntegerField(help_text="Completed trials the importance is estimated on.")
    message = serializers.CharField(allow_blank=True, help_text="Why there are no shares (e.g. too few trials).")


class ComparedStudySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    name = serializers.CharField()
    tuner = serializers.CharField()
    tuner_label = serializers.CharField()
    hypermodel = serializers.CharField()
    status = serializers.CharField()
    objective_metric = serializers.CharField()
    objective_direction = serializers.CharField()
    trials_total = serializers.IntegerField()
    trials_completed = serializers.IntegerField()
    history = ComparedHistorySerializer()
    best_trial = ComparedTrialSerializer(allow_null=True)
    importance = ImportanceSerializer()


class ObjectiveGroupSerializer(serializers.Serializer):
    metric = serializers.CharField()
    direction = serializers.CharField()
    studies = serializers.ListField(child=serializers.IntegerField())


class SideBySideRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    values = serializers.ListField(child=serializers.JSONField(allow_null=True),
                                   help_text="One per study, in the order of `studies`; null where it has none.")


class StudyComparisonSerializer(serializers.Serializer):
    dataset = serializers.IntegerField()
    objectives = ObjectiveGroupSerializer(many=True, help_text="Studies that share an objective share a y axis.")
    objectives_differ = serializers.BooleanField()
    leader = serializers.IntegerField(allow_null=True, help_text="The study with the best best trial, when all "
                                                                 "share one objective.")
    importance_method = serializers.CharField()
    metrics = SideBySideRowSerializer(many=True, help_text="The best trials' metrics.")
    hyperparameters = SideBySideRowSerializer(many=True, help_text="The best trials' hyperparameters.")
    studies = ComparedStudySerializer(many=True)


class StudyCompare(generics.GenericAPIView):
    serializer_class = StudyComparisonSerializer

    @extend_schema(parameters=[OpenApiParameter(
        "studies", int, many=True, explode=True, required=True,
        description="2 to 4 ids of studies of one dataset (repeat the parameter, or separate them with commas).")],
        responses={200: StudyComparisonSerializer, **ERRORS})
    def get(self, request):
        try:
            studies = get_studies_for_user(request, parse_study_ids(request.query_params.getlist("studies")))
            compared = studies_compared(studies=studies)
        except ComparisonError as exc:
            raise invalid("studies", str(exc)) from None
        for entry in compared["studies"]:
            entry["url"] = request.build_absolute_uri(reverse("api:study-detail", kwargs={"study_id": entry["id"]}))
            if entry["best_trial"]:
                entry["best_trial"]["url"] = request.build_absolute_uri(reverse(
                    "api:trial-detail", kwargs={"study_id": entry["id"], "trial_pk": entry["best_trial"]["id"]}))
        return Response(self.get_serializer({"dataset": studies[0].dataset_id, **compared}).data)
