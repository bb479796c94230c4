from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    initial = True
    dependencies = ()
    operations = (UpgradeSchema(version=2),)
