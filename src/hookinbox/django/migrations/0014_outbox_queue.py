from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0013_payloads_beside_the_events"),)
    operations = (UpgradeSchema(version=15),)
