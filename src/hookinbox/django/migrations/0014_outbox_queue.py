from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0012_learned_secrets"),)
    operations = (UpgradeSchema(version=15),)
