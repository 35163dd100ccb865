"""The project's tasks: ``ALKSTORE["TASKS"]`` names this registry, which ``manage.py
alkstore_worker`` runs."""

from __future__ import annotations

import alkstore

from .models import Order

tasks = alkstore.Tasks()


@tasks.task(queue="confirmations", retry_limit=3)
def send_confirmation(order: int) -> dict[str, bool]:
    """Confirm the order (a real app would send the e-mail here)."""
    Order.objects.filter(pk=order).update(confirmed=True)
    return {"sent": True}
