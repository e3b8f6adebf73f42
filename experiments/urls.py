from django.urls import path

from experiments.views import datasets, ensembles, fleet, leaderboard, models, studies, teams

urlpatterns = [
    path("", teams.dashboard, name="dashboard"),
    path("teams/switch/", teams.switch_team, name="switch_team"),
    path("datasets/", datasets.dataset_list, name="dataset_list"),
    path("datasets/upload/", datasets.dataset_upload, name="dataset_upload"),
    path("datasets/<int:dataset_id>/", datasets.dataset_detail, name="dataset_detail"),
    path("studies/", studies.study_list, name="study_list"),
    path("studies/new/", studies.study_new, name="study_new"),
    path("studies/<int:study_id>/", studies.study_detail, name="study_detail"),
    path("studies/<int:study_id>/live/", studies.study_live, name="study_live"),
    path("studies/<int:study_id>/chart-data/", studies.study_chart_data, name="study_chart_data"),
    path("studies/<int:study_id>/trials.csv", studies.study_trials_csv, name="study_trials_csv"),
    path("studies/<int:study_id>/compare/", studies.study_compare, name="study_compare"),
    path("studies/<int:study_id>/trials/<int:trial_pk>/notes/", studies.trial_annotate_view, name="trial_annotate"),
    path("studies/<int:study_id>/start/", studies.study_start_view, name="study_start"),
    path("studies/<int:study_id>/cancel/", studies.study_cancel_view, name="study_cancel"),
    path("studies/<int:study_id>/budget/", studies.study_budget_view, name="study_budget"),
    path("studies/<int:study_id>/models/", models.study_models_request, name="study_models_request"),
    path("studies/<int:study_id>/trials/<int:trial_pk>/models/", models.trial_models_request,
         name="trial_models_request"),
    path("models/", models.model_list, name="model_list"),
    path("ensembles/new/", ensembles.ensemble_new, name="ensemble_new"),
    path("leaderboard/", leaderboard.leaderboard_view, name="leaderboard"),
    path("models/<int:model_id>/", models.model_detail, name="model_detail"),
    path("models/<int:model_id>/live/", models.model_live, name="model_live"),
    path("models/<int:model_id>/download/<str:fmt>/", models.model_download, name="model_download"),
    path("models/<int:model_id>/model-card.json", models.model_card_download, name="model_card"),
    path("workers/", fleet.worker_list, name="worker_list"),
    path("studies/<int:study_id>/trials/<int:trial_pk>/", studies.trial_detail, name="trial_detail"),
]
