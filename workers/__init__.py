"""What runs on worker hosts. Imported only by Celery worker processes: it loads TensorFlow."""
