from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from experiments.views import accounts, probes
from experiments.views.notifications import notification_settings
from experiments.views.scaling import scaling_view
from experiments.views.teams import invitation_accept_view
from experiments.views.tokens import api_tokens

# A path no route matches answers JSON under /api/, the page elsewhere.
handler404 = "experiments.api.errors.not_found"

# Account pages work without a team; an invitation link works without an account (the
# token is the credential), so it lives here and not among the team pages.
urlpatterns = [
    path("healthz", probes.healthz, name="healthz"),
    path("readyz", probes.readyz, name="readyz"),
    path("metrics", probes.metrics, name="metrics"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("sso/start/", accounts.sso_start, name="sso_start"),
    path("sso/callback/", accounts.sso_callback, name="sso_callback"),
    path("password/change/", accounts.LimitedPasswordChangeView.as_view(), name="password_change"),
    path("password/change/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("password/reset/", accounts.ThrottledPasswordResetView.as_view(), name="password_reset"),
    path("password/reset/sent/", auth_views.PasswordResetDoneView.as_view(), name="password_reset_done"),
    path("password/reset/<uidb64>/<token>/", auth_views.PasswordResetConfirmView.as_view(),
         name="password_reset_confirm"),
    path("password/reset/complete/", auth_views.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
    path("invitations/<str:token>/", invitation_accept_view, name="invitation_accept"),
    path("account/tokens/", api_tokens, name="api_tokens"),
    path("account/notifications/", notification_settings, name="notification_settings"),
    path("scaling/<str:queue>/", scaling_view, name="scaling"),
    path("api/v1/", include("experiments.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api_schema"), name="api_docs"),
    path("admin/", admin.site.urls),
    path("", include("experiments.urls")),
]
