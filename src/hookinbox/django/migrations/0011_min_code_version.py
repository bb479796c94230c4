from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0010_received_via"),)
    operations = (UpgradeSchema(version=12),)
