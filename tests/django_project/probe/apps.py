from django.apps import AppConfig


class ProbeConfig(AppConfig):
    name = "tests.django_project.probe"
    label = "probe"
