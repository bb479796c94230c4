from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0006_outbox_trace_context"),)
    operations = (UpgradeSchema(version=8),)
