from django.urls import path

from experiments.api import (
    audit,
    datasets,
    ensembles,
    fleet,
    leaderboard,
    notifications,
    predictions,
    recipes,
    registry,
    serving_exports,
    studies,
    study_comparison,
    trained_models,
    trials,
)

app_name = "api"

# Path converter names match the pages' (dataset_id, study_id, trial_pk, model_id, fmt).
urlpatterns = [
    path("datasets/", datasets.DatasetList.as_view(), name="dataset-list"),
    path("datasets/<int:dataset_id>/", datasets.DatasetDetail.as_view(), name="dataset-detail"),
    path("studies/", studies.StudyList.as_view(), name="study-list"),
    path("studies/compare/", study_comparison.StudyCompare.as_view(), name="study-compare"),
    path("studies/<int:study_id>/", studies.StudyDetail.as_view(), name="study-detail"),
    # Resume before start before cancel: the route crawler posts them in this order.
    path("studies/<int:study_id>/resume/", studies.StudyResume.as_view(), name="study-resume"),
    path("studies/<int:study_id>/start/", studies.StudyStart.as_view(), name="study-start"),
    path("studies/<int:study_id>/cancel/", studies.StudyCancel.as_view(), name="study-cancel"),
    path("studies/<int:study_id>/budget/", studies.StudyBudget.as_view(), name="study-budget"),
    path("studies/<int:study_id>/clone/", studies.StudyClone.as_view(), name="study-clone"),
    path("studies/<int:study_id>/models/", trained_models.StudyModels.as_view(), name="study-models"),
    path("studies/<int:study_id>/trials/", trials.TrialList.as_view(), name="trial-list"),
    path("studies/<int:study_id>/pareto-front/", trials.StudyParetoFront.as_view(), name="study-pareto-front"),
    path("studies/<int:study_id>/trials/<int:trial_pk>/", trials.TrialDetail.as_view(), name="trial-detail"),
    path("studies/<int:study_id>/trials/<int:trial_pk>/epochs/", trials.TrialEpochs.as_view(), name="trial-epochs"),
    path("studies/<int:study_id>/trials/<int:trial_pk>/reruns/", trials.TrialRerunCreate.as_view(),
         name="trial-reruns"),
    path("models/", trained_models.ModelList.as_view(), name="model-list"),
    path("models/<int:model_id>/", trained_models.ModelDetail.as_view(), name="model-detail"),
    path("models/<int:model_id>/download/<str:fmt>/", trained_models.ModelDownload.as_view(), name="model-download"),
    path("ensembles/", ensembles.EnsembleCreate.as_view(), name="ensemble-create"),
    path("ensembles/<int:ensemble_id>/", ensembles.EnsembleDetail.as_view(), name="ensemble-detail"),
    path("leaderboard/<int:dataset_id>/", leaderboard.LeaderboardView.as_view(), name="leaderboard"),
    path("workers/", fleet.WorkerList.as_view(), name="worker-list"),
    path("webhooks/", notifications.WebhookList.as_view(), name="webhook-list"),
    path("deliveries/", notifications.DeliveryList.as_view(), name="delivery-list"),
    path("audit/", audit.AuditList.as_view(), name="audit-list"),
    # The model registry.
    path("registry/", registry.RegistryList.as_view(), name="registry-list"),
    path("registry/<int:registered_model_id>/", registry.RegistryDetail.as_view(), name="registry-detail"),
    path("registry/<int:registered_model_id>/versions/", registry.RegistryVersions.as_view(),
         name="registry-versions"),
    path("registry/<int:registered_model_id>/aliases/<str:alias>/", registry.RegistryAlias.as_view(),
         name="registry-alias"),
    path("registry/<int:registered_model_id>/moves/<int:move_id>/rollback/", registry.RegistryRollback.as_view(),
         name="registry-rollback"),
    # Ensemble recipes.
    path("recipes/", recipes.RecipeList.as_view(), name="recipe-list"),
    path("recipes/<int:recipe_id>/", recipes.RecipeDetail.as_view(), name="recipe-detail"),
    path("recipes/<int:recipe_id>/clone/", recipes.RecipeClone.as_view(), name="recipe-clone"),
    path("recipes/<int:recipe_id>/take-over/", recipes.RecipeTakeOver.as_view(), name="recipe-take-over"),
    path("recipes/<int:recipe_id>/preview/", recipes.RecipePreview.as_view(), name="recipe-preview"),
    path("recipes/<int:recipe_id>/runs/", recipes.RecipeRuns.as_view(), name="recipe-runs"),
    # Serving from the registry: request an export of the team's registry, read the last one.
    path("serving-exports/", serving_exports.ServingExports.as_view(), name="serving-exports"),
    path("serving-exports/<int:export_id>/", serving_exports.ServingExportDetail.as_view(),
         name="serving-export-detail"),
    # Batch predictions.
    path("predictions/", predictions.PredictionList.as_view(), name="prediction-list"),
    path("predictions/<int:prediction_id>/", predictions.PredictionDetail.as_view(), name="prediction-detail"),
    path("predictions/<int:prediction_id>/cancel/", predictions.PredictionCancel.as_view(), name="prediction-cancel"),
    path("predictions/<int:prediction_id>/download/<str:fmt>/", predictions.PredictionDownload.as_view(),
         name="prediction-download"),
]
