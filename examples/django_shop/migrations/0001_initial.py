"""The ``Order`` table."""

from django.db import migrations, models


class Migration(migrations.Migration):
    """Create ``django_shop_order``."""

    initial = True
    dependencies: list[tuple[str, str]] = []
    operations = [
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("email", models.CharField(max_length=200)),
                ("item", models.CharField(max_length=200)),
                ("confirmed", models.BooleanField(default=False)),
            ],
        ),
    ]
