from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0002_revoked_sessions"),)
    operations = (UpgradeSchema(version=4),)
