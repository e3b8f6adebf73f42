"""Datasets: list, upload or pick a bundled one, detail."""

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response

from experiments.api.bodies import StrictSerializer, body_object, strict, validated
from experiments.api.errors import ERRORS
from experiments.api.params import choice_param
from experiments.api.responses import absolute
from experiments.forms.datasets import BundledDatasetForm, DatasetUploadForm
from experiments.models import Dataset
from experiments.selectors.datasets import team_datasets
from experiments.services.datasets import dataset_create_bundled, dataset_create_upload
from experiments.views.access import get_dataset_for_user


class DatasetSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()

    class Meta:
        model = Dataset
        fields = ["id", "url", "name", "source", "bundled_name", "file_format", "target_column", "task", "kind",
                  "details", "n_rows", "n_features", "input_shape", "feature_names", "classes", "class_counts",
                  "val_fraction", "test_fraction", "split_seed", "split_sizes", "created"]

    def get_url(self, obj) -> str:
        return absolute(self.context, reverse("api:dataset-detail", kwargs={"dataset_id": obj.id}))


class BundledDatasetInput(StrictSerializer):
    bundled_name = serializers.CharField()
    name = serializers.CharField(required=False, allow_blank=True)
    val_fraction = serializers.FloatField(required=False)
    test_fraction = serializers.FloatField(required=False)
    seed = serializers.IntegerField(required=False)


class DatasetUploadInput(StrictSerializer):
    name = serializers.CharField()
    file = serializers.FileField()
    kind = serializers.ChoiceField(choices=["auto", "tabular", "image", "text", "sequence"], required=False)
    target_column = serializers.CharField(required=False, allow_blank=True)
    text_column = serializers.CharField(required=False, allow_blank=True)
    window = serializers.IntegerField(required=False, allow_null=True)
    horizon = serializers.IntegerField(required=False, allow_null=True)
    image_size = serializers.CharField(required=False, allow_blank=True)
    color_mode = serializers.ChoiceField(choices=["auto", "grayscale", "rgb", "rgba"], required=False)
    task = serializers.ChoiceField(choices=["auto", "classification", "regression"], required=False)
    val_fraction = serializers.FloatField(required=False)
    test_fraction = serializers.FloatField(required=False)
    seed = serializers.IntegerField(required=False)


class DatasetList(generics.GenericAPIView):
    serializer_class = DatasetSerializer

    @extend_schema(parameters=[
        OpenApiParameter("kind", str, enum=Dataset.Kind.values),
        OpenApiParameter("task", str, enum=Dataset.Task.values),
        OpenApiParameter("q", str, description="Part of the name.")], responses={200: DatasetSerializer(many=True),
                                                                                **ERRORS})
    def get(self, request):
        datasets = team_datasets(team=request.team)
        if kind := choice_param(request, "kind", Dataset.Kind.values):
            datasets = datasets.filter(kind=kind)
        if task := choice_param(request, "task", Dataset.Task.values):
            datasets = datasets.filter(task=task)
        if q := request.query_params.get("q", "").strip():
            datasets = datasets.filter(name__icontains=q)
        page = self.paginate_queryset(datasets)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request={"multipart/form-data": DatasetUploadInput, "application/json": BundledDatasetInput},
                   responses={201: DatasetSerializer, **ERRORS})
    def post(self, request):
        data = body_object(request)
        if "bundled_name" in data and "file" not in request.FILES:
            strict(BundledDatasetInput, data)
            form = validated(BundledDatasetForm, data)
            dataset = dataset_create_bundled(team=request.team, user=request.user, **form.cleaned_data)
        else:
            strict(DatasetUploadInput, {**data, **{k: None for k in request.FILES}})
            form = validated(DatasetUploadForm, {k: v for k, v in data.items() if k not in request.FILES},
                             files=request.FILES)
            upload = form.cleaned_data["file"]
            dataset = dataset_create_upload(
                team=request.team, user=request.user, filename=upload.name, data=upload,
                size=upload.size, limit_mb=settings.UPLOAD_MAX_MB, options=form.upload_options(),
                **{k: form.cleaned_data[k] for k in ("name", "val_fraction", "test_fraction", "seed")})
        return Response(self.get_serializer(dataset).data, status=status.HTTP_201_CREATED)


class DatasetDetail(generics.GenericAPIView):
    serializer_class = DatasetSerializer

    @extend_schema(responses={200: DatasetSerializer, **ERRORS})
    def get(self, request, dataset_id: int):
        return Response(self.get_serializer(get_dataset_for_user(request, dataset_id)).data)
