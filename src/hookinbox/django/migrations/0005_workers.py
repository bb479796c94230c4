from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0004_attempts_history"),)
    operations = (UpgradeSchema(version=6),)
