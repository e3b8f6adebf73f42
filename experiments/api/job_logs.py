"""What a trial or trained model printed while it ran, one entry per run (oldest first)."""

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.response import Response

from experiments.api.errors import ERRORS
from experiments.models import JobLog
from experiments.selectors.job_logs import model_logs, trial_logs
from experiments.views.access import get_model_for_user, get_trial_for_user


class JobLogSerializer(serializers.ModelSerializer):
    text = serializers.CharField(help_text="Each line with its time; a long log keeps its first and last lines, "
                                           "with a marker of what was cut between them.")

    class Meta:
        model = JobLog
        fields = ["attempt", "running", "lines", "cut_lines", "cut_bytes", "started", "updated", "text"]


class TrialLogs(generics.GenericAPIView):
    serializer_class = JobLogSerializer
    pagination_class = None  # a few runs, each bounded: one answer

    @extend_schema(responses={200: JobLogSerializer(many=True), **ERRORS})
    def get(self, request, study_id: int, trial_pk: int):
        logs = trial_logs(get_trial_for_user(request, study_id, trial_pk))
        return Response(self.get_serializer(logs, many=True).data)


class ModelLogs(generics.GenericAPIView):
    serializer_class = JobLogSerializer
    pagination_class = None  # a few runs, each bounded: one answer

    @extend_schema(responses={200: JobLogSerializer(many=True), **ERRORS})
    def get(self, request, model_id: int):
        return Response(self.get_serializer(model_logs(get_model_for_user(request, model_id)), many=True).data)
