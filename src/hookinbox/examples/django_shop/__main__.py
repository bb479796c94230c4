"""This example's manage.py."""

import os

from django.core.management import execute_from_command_line

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hookinbox.examples.django_shop.settings")
execute_from_command_line(["manage.py", *__import__("sys").argv[1:]])
