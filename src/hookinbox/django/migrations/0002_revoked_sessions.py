from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0001_initial"),)
    operations = (UpgradeSchema(version=3),)
