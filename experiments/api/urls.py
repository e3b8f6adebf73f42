from django.urls import path

from experiments.api import views

app_name = "api"

# Path converter names match the pages' (dataset_id, study_id, trial_pk, model_id, fmt).
urlpatterns = [
    path("datasets/", views.DatasetList.as_view(), name="dataset-list"),
    path("datasets/<int:dataset_id>/", views.DatasetDetail.as_view(), name="dataset-detail"),
    path("studies/", views.StudyList.as_view(), name="study-list"),
    path("studies/compare/", views.StudyCompare.as_view(), name="study-compare"),
    path("studies/<int:study_id>/", views.StudyDetail.as_view(), name="study-detail"),
    # Resume before start before cancel: the route crawler posts them in this order.
    path("studies/<int:study_id>/resume/", views.StudyResume.as_view(), name="study-resume"),
    path("studies/<int:study_id>/start/", views.StudyStart.as_view(), name="study-start"),
    path("studies/<int:study_id>/cancel/", views.StudyCancel.as_view(), name="study-cancel"),
    path("studies/<int:study_id>/budget/", views.StudyBudget.as_view(), name="study-budget"),
    path("studies/<int:study_id>/clone/", views.StudyClone.as_view(), name="study-clone"),
    path("studies/<int:study_id>/models/", views.StudyModels.as_view(), name="study-models"),
    path("studies/<int:study_id>/trials/", views.TrialList.as_view(), name="trial-list"),
    path("studies/<int:study_id>/trials/<int:trial_pk>/", views.TrialDetail.as_view(), name="trial-detail"),
    path("studies/<int:study_id>/trials/<int:trial_pk>/epochs/", views.TrialEpochs.as_view(), name="trial-epochs"),
    path("studies/<int:study_id>/trials/<int:trial_pk>/reruns/", views.TrialRerunCreate.as_view(),
         name="trial-reruns"),
    path("models/", views.ModelList.as_view(), name="model-list"),
    path("models/<int:model_id>/", views.ModelDetail.as_view(), name="model-detail"),
    path("models/<int:model_id>/download/<str:fmt>/", views.ModelDownload.as_view(), name="model-download"),
    path("ensembles/", views.EnsembleCreate.as_view(), name="ensemble-create"),
    path("ensembles/<int:ensemble_id>/", views.EnsembleDetail.as_view(), name="ensemble-detail"),
    path("leaderboard/<int:dataset_id>/", views.LeaderboardView.as_view(), name="leaderboard"),
    path("workers/", views.WorkerList.as_view(), name="worker-list"),
    path("webhooks/", views.WebhookList.as_view(), name="webhook-list"),
    path("deliveries/", views.DeliveryList.as_view(), name="delivery-list"),
    path("audit/", views.AuditList.as_view(), name="audit-list"),
]
