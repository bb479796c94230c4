from django.db import migrations

from hookinbox.django._migration import UpgradeSchema


class Migration(migrations.Migration):
    dependencies = (("hookinbox", "0009_room_for_processing"),)
    operations = (UpgradeSchema(version=11),)
