"""What a trial or trained model printed while it ran, and what it used of its host, one entry per run
(oldest first)."""

from drf_spectacular.utils import extend_schema, extend_schema_view
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


class SampleSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    values = serializers.JSONField(help_text="cpu_percent (100 = one core), rss_bytes, load1 and, on a GPU host, gpus: "
                                             "per GPU index, utilization_percent, memory_used_bytes, "
                                             "memory_total_bytes, power_watts, temperature_c. A figure the host "
                                             "cannot give is absent, not zero.")


class RunSamplesSerializer(serializers.ModelSerializer):
    samples = SampleSerializer(many=True, source="sample_rows")

    class Meta:
        model = JobLog
        fields = ["attempt", "running", "started", "updated", "samples"]


class _Runs(generics.GenericAPIView):
    """One entry per run of a trial or model, oldest first: a few runs, each bounded, so one answer.
    Each view below says whose runs with its `runs(request, **ids)`."""

    pagination_class = None

    def get(self, request, **ids):
        return Response(self.get_serializer(self.runs(request, **ids), many=True).data)


def _many(serializer):
    return extend_schema_view(get=extend_schema(responses={200: serializer(many=True), **ERRORS}))


@_many(RunSamplesSerializer)
class TrialSystemMetrics(_Runs):
    """What each run of the trial used of its host, sampled every few seconds by its worker."""

    serializer_class = RunSamplesSerializer

    def runs(self, request, study_id: int, trial_pk: int) -> list:
        return trial_logs(get_trial_for_user(request, study_id, trial_pk), samples=True)


@_many(JobLogSerializer)
class TrialLogs(_Runs):
    """What each run of the trial printed, warned and logged."""

    serializer_class = JobLogSerializer

    def runs(self, request, study_id: int, trial_pk: int) -> list:
        return trial_logs(get_trial_for_user(request, study_id, trial_pk))


@_many(JobLogSerializer)
class ModelLogs(_Runs):
    """What each run of the model's job printed, warned and logged."""

    serializer_class = JobLogSerializer

    def runs(self, request, model_id: int) -> list:
        return model_logs(get_model_for_user(request, model_id))
