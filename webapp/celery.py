import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
# A worker does not run Django's system checks at start: the URL check imports every view, form and
# the API (scikit-learn with them), 1.2 s of CPU before the worker is ready, for pages it never
# serves. The web process, `manage.py check` and `migrate` run them; the worker keeps its layers.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("tuneboard", include=["workers.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
