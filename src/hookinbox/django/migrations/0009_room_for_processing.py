from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0008_queue_beside_the_events"),)
    operations = (UpgradeSchema(version=10),)
