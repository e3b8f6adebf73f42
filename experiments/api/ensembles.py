"""Ensembles: make one from models and trials, and read one."""

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.response import Response

from experiments.api.bodies import StrictSerializer, body_object, strict, validated
from experiments.api.errors import ERRORS, invalid
from experiments.api.responses import accepted
from experiments.api.trained_models import TrainedModelSerializer
from experiments.forms.ensembles import EnsembleForm
from experiments.services.ensembles import EnsembleError, ensemble_create
from experiments.views.access import get_model_for_user


class EnsembleInput(StrictSerializer):
    members = serializers.ListField(child=serializers.CharField(), help_text='["model:12", "trial:34"]')
    method = serializers.ChoiceField(choices=["mean", "nelder_mead", "greedy", "stacking"])
    name = serializers.CharField(required=False, allow_blank=True)
    greedy_rounds = serializers.IntegerField(required=False)
    seed = serializers.IntegerField(required=False)


class EnsembleCreate(generics.GenericAPIView):
    serializer_class = TrainedModelSerializer

    @extend_schema(request=EnsembleInput, responses={202: TrainedModelSerializer, **ERRORS})
    def post(self, request):
        data = body_object(request)
        strict(EnsembleInput, data)
        if isinstance(data.get("members"), str):
            data["members"] = [data["members"]]
        form = validated(EnsembleForm, data, team=request.team)
        cleaned = form.cleaned_data
        try:
            ensemble = ensemble_create(team=request.team, user=request.user, members=cleaned["members"],
                                       method=cleaned["method"], rounds=cleaned["greedy_rounds"], seed=cleaned["seed"],
                                       name=cleaned["name"])
        except EnsembleError as exc:
            raise invalid(None, str(exc)) from None
        return accepted(self.get_serializer(ensemble).data)


class EnsembleDetail(generics.GenericAPIView):
    serializer_class = TrainedModelSerializer

    @extend_schema(responses={200: TrainedModelSerializer, **ERRORS})
    def get(self, request, ensemble_id: int):
        model = get_model_for_user(request, ensemble_id)
        if not model.is_ensemble:
            raise Http404
        return Response(self.get_serializer(model).data)
