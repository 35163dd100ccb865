"""The view: save the order and send its job in one ``transaction.atomic()`` block.

``connection.connection`` is the psycopg 3 connection Django runs the block on;
``store.using()`` puts the store on it, so the job commits or rolls back with the order.
The store itself is opened once per process (its own small pool, used by everything that
is not inside one of Django's transactions) and lives as long as the process.
"""

from __future__ import annotations

import functools
import json

from django.conf import settings
from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

import alkstore

from .models import Order

QUEUE = "confirmations"


@functools.cache
def store() -> alkstore.Store:
    """The process's store (opened, and the schema installed, on first use)."""
    opened = alkstore.connect(settings.SHOP_DSN, schema="shop")
    opened.create_queue(QUEUE, exist_ok=True)
    return opened


class InvalidOrder(Exception):
    """Found out after the order was saved: the transaction rolls back."""


@csrf_exempt
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    """Save the order and send its confirmation job, both or neither."""
    body = json.loads(request.body)
    try:
        with transaction.atomic():
            order = Order.objects.create(email=body["email"], item=body["item"])
            job = store().using(connection.connection).send(QUEUE, {"order": order.pk})
            if "@" not in order.email:
                raise InvalidOrder(f"not an e-mail address: {order.email!r}")
    except InvalidOrder as exc:
        return JsonResponse({"error": str(exc)}, status=422)
    return JsonResponse({"order": order.pk, "job": str(job)}, status=201)
