"""A dataset's leaderboard, ranked like the page (JSON or CSV)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from experiments.api.errors import ERRORS
from experiments.api.pagination import Pagination
from experiments.api.params import choice_param, date_param, int_param
from experiments.selectors.ranking import leaderboard
from experiments.views.access import get_dataset_for_user
from experiments.views.leaderboard import leaderboard_csv


class LeaderboardRowSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    id = serializers.IntegerField()
    label = serializers.CharField()
    model_name = serializers.CharField()
    version = serializers.IntegerField()
    kind = serializers.CharField()
    test = serializers.FloatField(allow_null=True)
    val = serializers.FloatField(allow_null=True)
    val_source = serializers.CharField()
    test_metrics = serializers.DictField()
    val_metrics = serializers.DictField()
    study_id = serializers.IntegerField(allow_null=True)
    study = serializers.CharField()
    hypermodel = serializers.CharField()
    author = serializers.CharField()
    device_seconds = serializers.FloatField(
        allow_null=True, help_text="Its lineage's device time: its job's runs, its trial's, an ensemble's members'.")
    created = serializers.DateTimeField()
    warning = serializers.CharField()
    hp = serializers.DictField()


class LeaderboardSerializer(serializers.Serializer):
    dataset = serializers.IntegerField()
    metric = serializers.CharField()
    direction = serializers.CharField()
    hp_names = serializers.ListField(child=serializers.CharField())
    count = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    results = LeaderboardRowSerializer(many=True)


class LeaderboardView(generics.GenericAPIView):
    serializer_class = LeaderboardSerializer
    renderer_classes = [JSONRenderer]
    pagination_class = Pagination

    @extend_schema(parameters=[
        OpenApiParameter("study", int), OpenApiParameter("hypermodel", str), OpenApiParameter("author", int),
        OpenApiParameter("since", OpenApiTypes.DATE), OpenApiParameter("until", OpenApiTypes.DATE),
        OpenApiParameter("sort", str, description="test, val, name, kind, study, hypermodel, author, created "
                                                   "or hp:<name>"),
        OpenApiParameter("dir", str, enum=["asc", "desc"]), OpenApiParameter("page", int),
        OpenApiParameter("page_size", int), OpenApiParameter("format", str, enum=["json", "csv"])],
        responses={(200, "application/json"): LeaderboardSerializer, (200, "text/csv"): OpenApiTypes.STR,
                   **ERRORS})
    def get(self, request, dataset_id: int):
        dataset = get_dataset_for_user(request, dataset_id)
        direction = choice_param(request, "dir", ["asc", "desc"])
        fmt = choice_param(request, "format", ["json", "csv"])
        board = leaderboard(team=request.team, dataset=dataset, study_id=int_param(request, "study"),
                            hypermodel=request.query_params.get("hypermodel", ""),
                            author_id=int_param(request, "author"), since=date_param(request, "since"),
                            until=date_param(request, "until"), sort=request.query_params.get("sort", "test"),
                            descending=None if not direction else direction == "desc")
        if fmt == "csv":
            return leaderboard_csv(dataset, board)
        page = self.paginate_queryset(board["rows"])
        rows = [{**{k: row[k] for k in LeaderboardRowSerializer().fields}} for row in page]
        return Response({"dataset": dataset.id, "metric": board["metric"], "direction": board["ranking"]["direction"],
                         "hp_names": board["hp_names"], "count": self.paginator.page.paginator.count,
                         "next": self.paginator.get_next_link(), "previous": self.paginator.get_previous_link(),
                         "results": LeaderboardRowSerializer(rows, many=True).data})
