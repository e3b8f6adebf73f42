"""The worker fleet and the trials of this team each worker runs."""

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers

from experiments.api.errors import ERRORS
from experiments.selectors.fleet import fleet_rows
from experiments.services.job_kinds import JOB_KINDS


class WorkerTrialSerializer(serializers.Serializer):
    study = serializers.IntegerField()
    trial = serializers.IntegerField()
    trial_id = serializers.CharField()


class WorkerJobSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="Its JOB_KINDS name: models, reruns, conversions, ...")
    id = serializers.IntegerField()
    label = serializers.CharField()


class WorkerSerializer(serializers.Serializer):
    name = serializers.CharField()
    hostname = serializers.CharField()
    queues = serializers.ListField(child=serializers.CharField())
    backend = serializers.CharField(help_text="The Keras backend its children train with (tensorflow or jax).")
    devices = serializers.JSONField()
    concurrency = serializers.IntegerField()
    packing = serializers.DictField(help_text="On a GPU host: trials per GPU (setting N or auto, trials_per_gpu, "
                                              "reason); {} elsewhere.")
    versions = serializers.DictField()
    started = serializers.DateTimeField()
    last_heartbeat = serializers.DateTimeField()
    stopped = serializers.DateTimeField(allow_null=True)
    alive = serializers.BooleanField()
    trials = WorkerTrialSerializer(many=True)
    other_teams_trials = serializers.IntegerField()
    jobs = WorkerJobSerializer(many=True)
    other_teams_jobs = serializers.IntegerField()


class WorkerList(generics.GenericAPIView):
    serializer_class = WorkerSerializer

    @extend_schema(responses={200: WorkerSerializer(many=True), **ERRORS})
    def get(self, request):
        rows = []
        for row in fleet_rows(team=request.team, kinds=JOB_KINDS.values()):
            w = row["worker"]
            rows.append({"name": w.name, "hostname": w.hostname, "queues": w.queues, "devices": w.devices,
                         "concurrency": w.concurrency, "packing": w.packing, "versions": w.versions,
                         "backend": w.backend,
                         "started": w.started,
                         "last_heartbeat": w.last_heartbeat, "stopped": w.stopped, "alive": row["alive"],
                         "trials": [{"study": t.study_id, "trial": t.pk, "trial_id": t.trial_id} for t in row["trials"]
                                    if t.study.team_id == request.team.id],
                         "other_teams_trials": row["other_teams"], "jobs": row["jobs"],
                         "other_teams_jobs": row["other_teams_jobs"]})
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
