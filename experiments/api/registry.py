"""The model registry: registered models, registering a model as a version, aliases (set, remove)
and rolling back an alias move. Validated by the pages' forms (experiments/forms/registry.py)."""

from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response

from experiments.api.bodies import NoFields, StrictSerializer, body_object, strict, validated
from experiments.api.errors import ERRORS
from experiments.api.responses import absolute
from experiments.forms.registry import AliasForm, AliasRemoveForm, RegistryCreateForm, VersionForm
from experiments.selectors.registry import (
    registered_model_aliases,
    registered_model_detail,
    registered_model_move,
    team_registered_models,
)
from experiments.services.registry import (
    registry_alias_remove,
    registry_alias_rollback,
    registry_alias_set,
    registry_register,
)
from experiments.views.registry import get_registered_model_for_user


class VersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    model = serializers.IntegerField(source="trained_model_id")
    model_name = serializers.CharField(source="trained_model.__str__")
    model_url = serializers.SerializerMethodField()
    status = serializers.CharField(source="trained_model.status")
    test_metrics = serializers.DictField(help_text="The test metrics of the model, or of the variant this version is.")
    dataset = serializers.IntegerField(source="trained_model.dataset_id")
    description = serializers.CharField()
    aliases = serializers.ListField(child=serializers.CharField(), source="alias_names", default=list)
    created = serializers.DateTimeField()
    variant = serializers.SerializerMethodField(help_text="The quantized variant this version is ({id, method}), "
                                                          "or null for the float model.")

    def get_variant(self, obj) -> dict | None:
        return {"id": obj.variant_id, "method": obj.variant.method} if obj.variant_id else None

    def get_model_url(self, obj) -> str:
        return absolute(self.context, reverse("api:model-detail", kwargs={"model_id": obj.trained_model_id}))


class AliasSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.IntegerField(source="version.version")
    updated = serializers.DateTimeField()


class MoveSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    alias = serializers.CharField()
    from_version = serializers.SerializerMethodField()
    to_version = serializers.SerializerMethodField()
    user = serializers.SerializerMethodField()
    created = serializers.DateTimeField()
    rollback_of = serializers.IntegerField(source="rollback_of_id", allow_null=True)
    rollback_url = serializers.SerializerMethodField(help_text="POST here to move the alias back (its latest "
                                                               "move only).")

    def get_from_version(self, obj) -> int | None:
        return obj.from_version.version if obj.from_version_id else None

    def get_to_version(self, obj) -> int | None:
        return obj.to_version.version if obj.to_version_id else None

    def get_user(self, obj) -> str | None:
        return obj.user.username if obj.user_id else None

    def get_rollback_url(self, obj) -> str:
        return absolute(self.context, reverse("api:registry-rollback", kwargs={
            "registered_model_id": obj.registered_model_id, "move_id": obj.id}))


class RegisteredModelSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.SerializerMethodField()
    name = serializers.CharField()
    description = serializers.CharField()
    task = serializers.CharField()
    dataset_kind = serializers.CharField()
    input_signature = serializers.ListField(
        child=serializers.DictField(), source="contract.inputs",
        help_text='The inputs every version serves, by position, with the key TF Serving takes each under: '
                  '[{"name": "input_0", "shape": [null, 4], "dtype": "float32"}]')
    output_keys = serializers.ListField(child=serializers.CharField(), source="contract.outputs",
                                        help_text='The keys every version answers under: ["output_0"]')
    created = serializers.DateTimeField()
    version_count = serializers.IntegerField()
    latest_version = serializers.IntegerField(allow_null=True)
    aliases = serializers.DictField(child=serializers.IntegerField(), source="alias_map",
                                    help_text="alias -> version")

    def get_url(self, obj) -> str:
        return absolute(self.context, reverse("api:registry-detail", kwargs={"registered_model_id": obj.id}))


class ServingRequestSerializer(serializers.Serializer):
    method = serializers.CharField()
    path = serializers.CharField(help_text="TF Serving's REST path (port 8501), by the production alias when set.")
    body = serializers.CharField(help_text='JSON naming each input, one example: {"inputs": {"input_0": [...]}}.')
    shortened = serializers.BooleanField(help_text='Whether the body\'s "… N in all" stand for the rest of lists.')


class RegisteredModelDetailSerializer(RegisteredModelSerializer):
    versions = VersionSerializer(many=True, source="versions_list", help_text="Newest first.")
    moves = MoveSerializer(many=True, source="moves_list", help_text="Every alias move, newest first.")
    serving_request = ServingRequestSerializer(source="serving",
                                               help_text="The TF Serving REST request that works for every version.")


def _detail(registered, request) -> dict:
    detail = registered_model_detail(registered=registered)
    versions = detail["versions"]
    registered.versions_list, registered.version_count = versions, len(versions)
    registered.latest_version = versions[0].version if versions else None
    registered.alias_map = {a.name: a.version.version for a in detail["aliases"]}
    registered.moves_list = detail["moves"]
    registered.contract, registered.serving = detail["contract"], detail["serving"]
    return RegisteredModelDetailSerializer(registered, context={"request": request}).data


class RegisterInput(StrictSerializer):
    name = serializers.CharField(help_text="The registered model: an existing one of the team, or a new name.")
    model = serializers.IntegerField(help_text="The trained model's (or ensemble's) id.")
    description = serializers.CharField(required=False, allow_blank=True)
    variant = serializers.IntegerField(required=False, help_text="One of the model's made quantized variants, "
                                                                 "registered instead of the float model.")


class VersionInput(StrictSerializer):
    model = serializers.IntegerField(help_text="The trained model's (or ensemble's) id.")
    description = serializers.CharField(required=False, allow_blank=True)
    variant = serializers.IntegerField(required=False, help_text="One of the model's made quantized variants.")


class AliasInput(StrictSerializer):
    version = serializers.IntegerField()


class RegisteredVersionSerializer(VersionSerializer):
    registered_model = serializers.SerializerMethodField(help_text="The registered model's URL.")

    def get_registered_model(self, obj) -> str:
        return absolute(self.context, reverse("api:registry-detail",
                                              kwargs={"registered_model_id": obj.registered_model_id}))


class RegistryList(generics.GenericAPIView):
    serializer_class = RegisteredModelSerializer

    @extend_schema(responses={200: RegisteredModelSerializer(many=True), **ERRORS})
    def get(self, request):
        registered = team_registered_models(team=request.team)
        for item in registered:
            item.alias_map = {a["name"]: a["version"] for a in item.alias_rows}
        page = self.paginate_queryset(registered)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=RegisterInput, responses={201: RegisteredVersionSerializer, **ERRORS})
    def post(self, request):
        """Register a finished model under `name`: the next version of that registered model, made
        by this first registration when new."""
        data = body_object(request)
        strict(RegisterInput, data)
        form = validated(RegistryCreateForm, data, team=request.team)
        return _registered(request, form.cleaned_data, form.cleaned_data["name"])


def _registered(request, cleaned: dict, name: str) -> Response:
    version = registry_register(team=request.team, model=cleaned["model"], name=name, user=request.user,
                                description=cleaned.get("description") or "", variant_id=cleaned.get("variant"))
    version.alias_names = []
    return Response(RegisteredVersionSerializer(version, context={"request": request}).data,
                    status=status.HTTP_201_CREATED)


class RegistryDetail(generics.GenericAPIView):
    serializer_class = RegisteredModelDetailSerializer

    @extend_schema(responses={200: RegisteredModelDetailSerializer, **ERRORS})
    def get(self, request, registered_model_id: int):
        return Response(_detail(get_registered_model_for_user(request, registered_model_id), request))


class RegistryVersions(generics.GenericAPIView):
    serializer_class = RegisteredVersionSerializer

    @extend_schema(request=VersionInput, responses={201: RegisteredVersionSerializer, **ERRORS})
    def post(self, request, registered_model_id: int):
        registered = get_registered_model_for_user(request, registered_model_id)
        data = body_object(request)
        strict(VersionInput, data)
        form = validated(VersionForm, data, team=request.team)
        return _registered(request, form.cleaned_data, registered.name)


class RegistryAlias(generics.GenericAPIView):
    serializer_class = AliasSerializer

    @extend_schema(responses={200: AliasSerializer, **ERRORS})
    def get(self, request, registered_model_id: int, alias: str):
        registered = get_registered_model_for_user(request, registered_model_id)
        found = next((a for a in registered_model_aliases(registered=registered) if a.name == alias), None)
        if found is None:
            raise Http404("No such alias.")
        return Response(AliasSerializer(found).data)

    @extend_schema(request=AliasInput, responses={200: MoveSerializer, **ERRORS})
    def put(self, request, registered_model_id: int, alias: str):
        """Point the alias (made if new) at a version; the move is kept in the history."""
        registered = get_registered_model_for_user(request, registered_model_id)
        data = body_object(request)
        strict(AliasInput, data)
        form = validated(AliasForm, {**data, "alias": alias})
        move = registry_alias_set(registered=registered, alias=form.cleaned_data["alias"],
                                  version=form.cleaned_data["version"], user=request.user)
        return Response(MoveSerializer(move, context={"request": request}).data)

    @extend_schema(request=None, responses={200: MoveSerializer, **ERRORS})
    def delete(self, request, registered_model_id: int, alias: str):
        registered = get_registered_model_for_user(request, registered_model_id)
        form = validated(AliasRemoveForm, {"alias": alias})
        move = registry_alias_remove(registered=registered, alias=form.cleaned_data["alias"], user=request.user)
        return Response(MoveSerializer(move, context={"request": request}).data)


class RegistryRollback(generics.GenericAPIView):
    serializer_class = MoveSerializer

    @extend_schema(request=NoFields, responses={200: MoveSerializer, **ERRORS})
    def post(self, request, registered_model_id: int, move_id: int):
        """Move the alias back to where this move took it from (its latest move only), recorded as a new move."""
        registered = get_registered_model_for_user(request, registered_model_id)
        if registered_model_move(registered=registered, move_id=move_id) is None:
            raise Http404("No such alias move.")
        strict(NoFields, body_object(request))
        move = registry_alias_rollback(registered=registered, move_id=move_id, user=request.user)
        return Response(MoveSerializer(move, context={"request": request}).data)
