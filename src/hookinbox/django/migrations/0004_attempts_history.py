from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0003_audit"),)
    operations = (UpgradeSchema(version=5),)
