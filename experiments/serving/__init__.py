"""TF Serving's side of the registry: the folder layout (`<name>/<version>/` SavedModels) and its
`models.config`, written from a plan without the ORM or TensorFlow (workers and the
export_serving command alike build the plan from the registry)."""
