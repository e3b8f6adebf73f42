import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("tuneboard", include=["workers.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
