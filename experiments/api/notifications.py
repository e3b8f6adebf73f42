"""The team's webhooks and notification deliveries."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers

from experiments.api.errors import ERRORS
from experiments.api.params import choice_param
from experiments.models import NotificationDelivery
from experiments.selectors.notifications import team_deliveries
from experiments.selectors.webhooks import team_webhooks


class WebhookSerializer(serializers.Serializer):
    """A team webhook; never its secret, and only the host of its URL (a Slack URL's path is a credential)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    address = serializers.CharField(source="display_url")
    events = serializers.ListField(child=serializers.CharField())
    active = serializers.BooleanField()
    created = serializers.DateTimeField()


class DeliverySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    event = serializers.CharField(source="event.kind")
    event_id = serializers.IntegerField()
    text = serializers.CharField(source="event.text")
    channel = serializers.ChoiceField(choices=["email", "webhook"])
    webhook = serializers.IntegerField(source="webhook_id", allow_null=True)
    target = serializers.CharField()
    status = serializers.ChoiceField(choices=["pending", "sent", "failed"])
    attempts = serializers.IntegerField()
    response_code = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField()
    next_attempt = serializers.DateTimeField(allow_null=True)
    created = serializers.DateTimeField()
    sent_at = serializers.DateTimeField(allow_null=True)


class WebhookList(generics.GenericAPIView):
    serializer_class = WebhookSerializer

    @extend_schema(responses={200: WebhookSerializer(many=True), **ERRORS})
    def get(self, request):
        page = self.paginate_queryset(team_webhooks(team=request.team))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class DeliveryList(generics.GenericAPIView):
    serializer_class = DeliverySerializer

    @extend_schema(parameters=[
        OpenApiParameter("status", str, enum=NotificationDelivery.Status.values),
        OpenApiParameter("channel", str, enum=NotificationDelivery.Channel.values)],
        responses={200: DeliverySerializer(many=True), **ERRORS})
    def get(self, request):
        rows = team_deliveries(team=request.team, limit=None)
        if value := choice_param(request, "status", NotificationDelivery.Status.values):
            rows = rows.filter(status=value)
        if value := choice_param(request, "channel", NotificationDelivery.Channel.values):
            rows = rows.filter(channel=value)
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
