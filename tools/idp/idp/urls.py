from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Mounted at the origin so discovery is at /.well-known/openid-configuration.
    path("", include("oauth2_provider.urls", namespace="oauth2_provider")),
]
