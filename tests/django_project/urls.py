from django.urls import include, path

urlpatterns = [path("webhooks/", include("hookinbox.django.urls"))]
