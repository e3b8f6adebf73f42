"""An accelerator queue: what runs and what waits in claim order (GET), and a site admin's share
and quotas for a team on it (PUT)."""

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, generics, serializers
from rest_framework.response import Response

from experiments.api.bodies import StrictSerializer, body_object, strict, validated
from experiments.api.errors import ERRORS
from experiments.forms.queues import QueuePolicyForm
from experiments.selectors.queue_board import queue_board
from experiments.services.fair_share import queue_policy_set
from experiments.services.job_kinds import JOB_KINDS
from experiments.views.access import queue_or_404


class QueueTeamSerializer(serializers.Serializer):
    team = serializers.CharField(allow_null=True, help_text="null for another team (a site admin sees every name).")
    mine = serializers.BooleanField()
    held = serializers.IntegerField(help_text="Trials and jobs it runs on the queue now.")
    share = serializers.FloatField(help_text="weight / the sum of the weights of the teams using the queue.")
    weight = serializers.FloatField()
    max_concurrent = serializers.IntegerField(allow_null=True)
    device_hours_per_month = serializers.FloatField(allow_null=True)
    device_hours_spent = serializers.FloatField(help_text="Of its trials and jobs this calendar month.")


class QueueRunningSerializer(serializers.Serializer):
    team = serializers.CharField(allow_null=True)
    mine = serializers.BooleanField()
    study_id = serializers.IntegerField(allow_null=True)
    study = serializers.CharField(allow_null=True)
    trial_pk = serializers.IntegerField(allow_null=True)
    job = serializers.CharField(allow_null=True, help_text="A job running instead of a trial (\"model 12 (best-mlp)\", "
                                                           "\"re-run 3\"); null for a trial or another team's.")
    number = serializers.IntegerField(allow_null=True, help_text="The trial's start order in its study (Trial 3).")
    since = serializers.DateTimeField()


class QueueWaitingSerializer(serializers.Serializer):
    position = serializers.IntegerField(allow_null=True, help_text="In claim order; null: held by its team's quota.")
    team = serializers.CharField(allow_null=True)
    mine = serializers.BooleanField()
    study_id = serializers.IntegerField(allow_null=True)
    study = serializers.CharField(allow_null=True)
    job = serializers.CharField(allow_null=True, help_text="A job held by its team's quota; null for a study.")
    priority = serializers.CharField()
    since = serializers.DateTimeField()
    reason = serializers.CharField()
    estimated_start = serializers.DateTimeField(allow_null=True)


class QueueAtParallelismSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    running = serializers.IntegerField()
    parallelism = serializers.IntegerField()


class QueueSerializer(serializers.Serializer):
    queue = serializers.CharField()
    slots = serializers.IntegerField(help_text="Child processes of the live workers serving it (both backends).")
    slots_by_backend = serializers.DictField(child=serializers.IntegerField(),
                                             help_text="Each backend's workers run only its studies.")
    site_admin = serializers.BooleanField(help_text="Every team's studies are named for a site admin.")
    typical_trial_seconds = serializers.FloatField(allow_null=True)
    teams = QueueTeamSerializer(many=True)
    at_parallelism = QueueAtParallelismSerializer(
        many=True, help_text="Your team's running studies (every team's for a site admin) with trials left that run as "
                             "many at once as their parallelism allows: they take no slot and are not waiting.")
    running = QueueRunningSerializer(many=True)
    waiting = QueueWaitingSerializer(many=True)


class QueueDetail(generics.GenericAPIView):
    serializer_class = QueueSerializer

    @extend_schema(responses={200: QueueSerializer, **ERRORS})
    def get(self, request, queue: str):
        board = queue_board(queue=queue_or_404(queue), team=request.team, kinds=JOB_KINDS.values(),
                            site_admin=request.user.is_staff)
        return Response(self.get_serializer(board).data)


class PolicyInput(StrictSerializer):
    team = serializers.IntegerField()
    weight = serializers.FloatField(required=False, help_text="Default 1: an equal share.")
    max_concurrent = serializers.IntegerField(required=False, allow_null=True, help_text="null: no limit.")
    device_hours_per_month = serializers.FloatField(required=False, allow_null=True, help_text="null: no limit.")


class PolicySerializer(serializers.Serializer):
    team = serializers.IntegerField(source="team_id")
    queue = serializers.CharField()
    weight = serializers.FloatField()
    max_concurrent = serializers.IntegerField(allow_null=True)
    device_hours_per_month = serializers.FloatField(allow_null=True)
    updated = serializers.DateTimeField()


class QueuePolicy(generics.GenericAPIView):
    serializer_class = PolicySerializer

    @extend_schema(request=PolicyInput, responses={200: PolicySerializer, **ERRORS})
    def put(self, request, queue: str):
        queue = queue_or_404(queue)
        if not request.user.is_staff:
            raise exceptions.PermissionDenied("Only a site admin sets teams' shares and quotas.")
        data = body_object(request)
        strict(PolicyInput, data)
        form = validated(QueuePolicyForm, {"weight": 1.0, **data}, queue=queue)
        values = form.cleaned_data
        policy = queue_policy_set(team=values["team"], queue=queue, weight=values["weight"],
                                  max_concurrent=values["max_concurrent"],
                                  device_hours_per_month=values["device_hours_per_month"], user=request.user)
        return Response(self.get_serializer(policy).data)

    @extend_schema(exclude=True)
    def post(self, request, queue: str):
        """Forms and simple clients that cannot PUT."""
        return self.put(request, queue)
