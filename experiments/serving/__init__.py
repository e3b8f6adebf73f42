"""TF Serving's side of the registry (folder layout and models.config), written from a plan without the ORM or
TensorFlow, so a worker job and `manage.py export_serving` share it."""
