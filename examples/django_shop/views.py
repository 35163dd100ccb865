"""The view: save the order and send its confirmation task in one ``transaction.atomic()``
block.

:func:`alkstore.contrib.django.store` is the store on the connection Django runs the block
on, so the job commits or rolls back with the order.
"""

from __future__ import annotations

import json

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from alkstore.contrib.django import store

from .models import Order
from .tasks import send_confirmation


class InvalidOrder(Exception):
    """Found out after the order was saved: the transaction rolls back."""


@csrf_exempt
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    """Save the order and send its confirmation task, both or neither."""
    body = json.loads(request.body)
    try:
        with transaction.atomic():
            order = Order.objects.create(email=body["email"], item=body["item"])
            job = send_confirmation.send(store(), order.pk)
            if "@" not in order.email:
                raise InvalidOrder(f"not an e-mail address: {order.email!r}")
    except InvalidOrder as exc:
        return JsonResponse({"error": str(exc)}, status=422)
    return JsonResponse({"order": order.pk, "job": str(job)}, status=201)
