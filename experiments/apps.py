from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    name = "experiments"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from experiments.services.audit import register_audited_models
        from experiments.services.recipe_triggers import connect as connect_recipe_triggers

        register_audited_models()
        connect_recipe_triggers()
