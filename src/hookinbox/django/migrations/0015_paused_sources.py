from django.db import migrations

from hookinbox.django._migration import UpgradeSchema

# Issue 50's schema 16 (paused sources). On this branch it follows 0012 and brings the schema
# to the step after 13; merged, it depends on 0014 and names version 16.


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0012_learned_secrets"),)
    operations = (UpgradeSchema(version=14),)
