from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0007_due_in_lease_order"),)
    operations = (UpgradeSchema(version=9),)
