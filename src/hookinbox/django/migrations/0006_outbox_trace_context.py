from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0005_workers"),)
    operations = (UpgradeSchema(version=7),)
