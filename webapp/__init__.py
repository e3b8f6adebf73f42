# Load Celery with Django so `shared_task` and `transaction.on_commit` enqueueing use our app.
from webapp.celery import app as celery_app

__all__ = ["celery_app"]
