"""Ensemble recipes over REST (list, create, change, delete, clone, take over, preview, runs), validated by the
pages' forms so both give the same messages."""

from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response

from experiments.api.auth import OwnerOnly
from experiments.api.bodies import body_object, strict, validated
from experiments.api.errors import ERRORS, Conflict
from experiments.api.responses import absolute
from experiments.forms.recipes import RecipeCloneForm, RecipeForm, recipe_initial
from experiments.models import EnsembleRecipe, RecipeRun, Study
from experiments.selectors.recipe_lists import recipe_runs, recipe_triggers_stopped, team_recipe, team_recipes
from experiments.selectors.recipes import Rule
from experiments.services.recipe_runs import RecipeRunBusy
from experiments.services.recipes import (
    recipe_clone,
    recipe_create,
    recipe_delete,
    recipe_run_now,
    recipe_take_over,
    recipe_update,
)
from experiments.views.recipes import preview_context


def get_recipe(request, recipe_id: int) -> EnsembleRecipe:
    recipe = team_recipe(team=request.team, recipe_id=recipe_id)
    if recipe is None:
        raise Http404("No such recipe.")
    return recipe


class RecipeSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    source_studies = serializers.SerializerMethodField(help_text="The source studies' ids.")
    last_run_status = serializers.SerializerMethodField()
    acts_for = serializers.CharField(
        source="acts_for.get_username", allow_null=True, default=None, read_only=True,
        help_text="The member the recipe's triggered runs act for (its creator until an owner takes it over); "
                  "null when that account was deleted.")
    triggers_stopped = serializers.SerializerMethodField(
        help_text='Why the trigger starts no run now (that member left or was demoted), or "".')
    last_skipped = serializers.CharField(read_only=True, help_text='The last trigger that started nothing (that '
                                                                   'member may not act, or fewer than two picks), '
                                                                   'and why; "" since a run started.')

    class Meta:
        model = EnsembleRecipe
        fields = ["id", "url", "name", "description", "dataset", "source_studies", "source_tag", "metric",
                  "direction", "top_k", "per_group_max", "group_by", "include_pruned", "correlation_cap",
                  "members_as", "method", "greedy_rounds", "trigger", "register_as", "alias", "created", "updated",
                  "last_run_status", "acts_for", "triggers_stopped", "last_skipped", "last_skipped_at"]

    def get_url(self, obj) -> str:
        return absolute(self.context, reverse("api:recipe-detail", kwargs={"recipe_id": obj.id}))

    def get_source_studies(self, obj) -> list[int]:
        return sorted(study.id for study in obj.source_studies.all())

    def get_triggers_stopped(self, obj) -> str:
        return recipe_triggers_stopped(recipe=obj)

    def get_last_run_status(self, obj) -> str | None:
        if hasattr(obj, "last_run_status"):
            return obj.last_run_status
        last = obj.runs.order_by("-number").values_list("status", flat=True).first()
        return last


class RecipeInput(serializers.Serializer):
    """The body of POST and PUT (PATCH: any of them). Omitted fields take the form's defaults."""

    name = serializers.CharField(help_text="Lower-case letters, digits, '-' and '_'; unique in the team.")
    description = serializers.CharField(required=False, allow_blank=True)
    dataset = serializers.IntegerField(help_text="The dataset's id.")
    source_studies = serializers.ListField(child=serializers.IntegerField(), required=False,
                                           help_text="Studies of the dataset (ids); and/or source_tag.")
    source_tag = serializers.CharField(required=False, allow_blank=True,
                                       help_text="Every study of the dataset with this tag.")
    metric = serializers.CharField(required=False, help_text="Default val_loss.")
    direction = serializers.ChoiceField(choices=Study.Direction.choices, required=False)
    top_k = serializers.IntegerField(required=False, help_text="1 to 50.")
    per_group_max = serializers.IntegerField(required=False)
    group_by = serializers.ChoiceField(choices=EnsembleRecipe.GroupBy.choices, required=False)
    include_pruned = serializers.BooleanField(required=False)
    correlation_cap = serializers.FloatField(required=False, allow_null=True, help_text="Above 0, at most 1.")
    members_as = serializers.ChoiceField(choices=EnsembleRecipe.MembersAs.choices, required=False)
    method = serializers.ChoiceField(choices=EnsembleRecipe.Method.choices, required=False)
    greedy_rounds = serializers.IntegerField(required=False, help_text="1 to 1,000.")
    trigger = serializers.ChoiceField(choices=EnsembleRecipe.Trigger.choices, required=False)
    register_as = serializers.CharField(required=False, allow_blank=True)
    alias = serializers.CharField(required=False, allow_blank=True, help_text="Needs register_as.")


class RecipePatchInput(RecipeInput):
    name = serializers.CharField(required=False)
    dataset = serializers.IntegerField(required=False)


class RecipeCloneInput(serializers.Serializer):
    name = serializers.CharField(help_text="The copy's name.")


class RunInput(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, help_text="Shown beside the run.")


class CandidateSerializer(serializers.Serializer):
    trial_id = serializers.IntegerField()
    trial_number = serializers.IntegerField()
    study_id = serializers.IntegerField()
    study_name = serializers.CharField()
    hypermodel = serializers.CharField()
    value = serializers.FloatField(allow_null=True)
    pruned = serializers.BooleanField()
    model_id = serializers.IntegerField(allow_null=True)
    picked = serializers.BooleanField()
    to_retrain = serializers.BooleanField()
    why = serializers.CharField()
    key = serializers.CharField()


class PreviewSerializer(serializers.Serializer):
    candidates = CandidateSerializer(many=True)
    picked = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())


class RunSerializer(serializers.ModelSerializer):
    ensemble = serializers.IntegerField(source="ensemble_id", allow_null=True)
    ensemble_url = serializers.SerializerMethodField()
    registered_version = serializers.SerializerMethodField()
    comparison = serializers.DictField(help_text="Ensemble vs best member and mean, champion/challenger verdict.")
    changes = serializers.DictField(default=dict, help_text="Members added and removed since the previous run.")

    class Meta:
        model = RecipeRun
        fields = ["id", "number", "trigger", "trigger_key", "reason", "status", "members", "candidates",
                  "ensemble", "ensemble_url", "comparison", "changes", "registered_version", "promoted", "error",
                  "created", "finished"]

    def get_ensemble_url(self, obj) -> str | None:
        if not obj.ensemble_id:
            return None
        return absolute(self.context, reverse("api:model-detail", kwargs={"model_id": obj.ensemble_id}))

    def get_registered_version(self, obj) -> int | None:
        return obj.registered.version if obj.registered_id else None


def _recipe_body(request, data: dict, **kwargs) -> Response:
    return Response(RecipeSerializer(data, context={"request": request}).data, **kwargs)


class RecipeList(generics.GenericAPIView):
    serializer_class = RecipeSerializer

    @extend_schema(responses={200: RecipeSerializer(many=True), **ERRORS})
    def get(self, request):
        page = self.paginate_queryset(team_recipes(team=request.team))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=RecipeInput, responses={201: RecipeSerializer, **ERRORS})
    def post(self, request):
        data = body_object(request)
        strict(RecipeInput, data)
        form = validated(RecipeForm, data, team=request.team)
        recipe = recipe_create(team=request.team, user=request.user, data=form.cleaned_data)
        return _recipe_body(request, recipe, status=status.HTTP_201_CREATED)


class RecipeDetail(generics.GenericAPIView):
    serializer_class = RecipeSerializer

    @extend_schema(responses={200: RecipeSerializer, **ERRORS})
    def get(self, request, recipe_id: int):
        return _recipe_body(request, get_recipe(request, recipe_id))

    def _change(self, request, recipe_id: int, *, partial: bool) -> Response:
        recipe = get_recipe(request, recipe_id)
        data = body_object(request)
        strict(RecipePatchInput if partial else RecipeInput, data)
        if partial:  # the saved values for the fields left out
            base = {k: v for k, v in recipe_initial(recipe).items() if v is not None}
            data = {**base, **data}
        form = validated(RecipeForm, data, team=request.team, instance=recipe)
        recipe = recipe_update(recipe=recipe, user=request.user, data=form.cleaned_data)
        return _recipe_body(request, recipe)

    @extend_schema(request=RecipeInput, responses={200: RecipeSerializer, **ERRORS})
    def put(self, request, recipe_id: int):
        """Replace the recipe: fields left out take the form's defaults."""
        return self._change(request, recipe_id, partial=False)

    @extend_schema(request=RecipePatchInput, responses={200: RecipeSerializer, **ERRORS})
    def patch(self, request, recipe_id: int):
        """Change the fields given; the others keep their saved values."""
        return self._change(request, recipe_id, partial=True)

    @extend_schema(request=None, responses={204: None, **ERRORS})
    def delete(self, request, recipe_id: int):
        """Delete the recipe and its runs' records; the ensembles they built are kept."""
        recipe_delete(recipe=get_recipe(request, recipe_id), user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RecipeClone(generics.GenericAPIView):
    serializer_class = RecipeSerializer

    @extend_schema(request=RecipeCloneInput, responses={201: RecipeSerializer, **ERRORS})
    def post(self, request, recipe_id: int):
        recipe = get_recipe(request, recipe_id)
        data = body_object(request)
        strict(RecipeCloneInput, data)
        form = validated(RecipeCloneForm, data, team=request.team)
        copy = recipe_clone(recipe=recipe, user=request.user, name=form.cleaned_data["name"])
        return _recipe_body(request, copy, status=status.HTTP_201_CREATED)


class TakeOverPermission(OwnerOnly):
    message = "Only the team's owners can take a recipe over."


class RecipeTakeOver(generics.GenericAPIView):
    serializer_class = RecipeSerializer
    permission_classes = [TakeOverPermission]

    @extend_schema(request=None, responses={200: RecipeSerializer, **ERRORS})
    def post(self, request, recipe_id: int):
        """Owners: the recipe's triggered runs act for you from now on (they start again when the member
        they acted for has left the team or been demoted)."""
        recipe = get_recipe(request, recipe_id)
        return _recipe_body(request, recipe_take_over(recipe=recipe, user=request.user))


class RecipePreview(generics.GenericAPIView):
    serializer_class = PreviewSerializer

    @extend_schema(responses={200: PreviewSerializer, **ERRORS})
    def get(self, request, recipe_id: int):
        """Who the recipe would pick today: every candidate considered, picked or not, and why."""
        context = preview_context(Rule.of(get_recipe(request, recipe_id)))
        return Response({"candidates": [c.as_dict() for c in context["candidates"]],
                         "picked": context.get("picked_count", 0), "warnings": context["warnings"]})


class RecipeRuns(generics.GenericAPIView):
    serializer_class = RunSerializer

    @extend_schema(responses={200: RunSerializer(many=True), **ERRORS})
    def get(self, request, recipe_id: int):
        """The recipe's runs, newest first."""
        page = self.paginate_queryset(recipe_runs(recipe=get_recipe(request, recipe_id)))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=RunInput, responses={201: RunSerializer, 409: ERRORS[400], **ERRORS})
    def post(self, request, recipe_id: int):
        """Run now: start a run of the recipe with today's candidates, acting for you. 409 while a run of
        the recipe is waiting or building (nothing is started). A run whose ensemble the registry already
        holds completes at once, building and registering nothing (its comparison's verdict says so)."""
        recipe = get_recipe(request, recipe_id)
        data = body_object(request)
        strict(RunInput, data)
        reason = data.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise serializers.ValidationError({"reason": ["Must be text."]})
        try:
            run = recipe_run_now(recipe=recipe, user=request.user,
                                 reason=(reason or "").strip()[:500] or f"Run now by {request.user.username} (API)")
        except RecipeRunBusy as exc:
            raise Conflict(str(exc)) from None
        run.changes = {}
        return Response(self.get_serializer(run).data, status=status.HTTP_201_CREATED)
