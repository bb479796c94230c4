from django.db import migrations

from hookinbox.django._migration import UpgradeSchema

# Schema 16: paused sources.


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0014_outbox_queue"),)
    operations = (UpgradeSchema(version=16),)
