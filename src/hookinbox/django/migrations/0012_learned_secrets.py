from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0011_min_code_version"),)
    operations = (UpgradeSchema(version=13),)
