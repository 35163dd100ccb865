"""The app's one model."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    """An order; ``confirmed`` once its confirmation job ran."""

    email = models.CharField(max_length=200)
    item = models.CharField(max_length=200)
    confirmed = models.BooleanField(default=False)
