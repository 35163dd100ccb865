"""A Django project that sends a task inside ``transaction.atomic()`` on Django's own
connection, with the ``alkstore.contrib.django`` app.

``POST /orders`` saves an ``Order`` and sends its confirmation task in the same transaction
(``send_confirmation.send(store(), …)``: :func:`alkstore.contrib.django.store` is the store on
Django's connection); ``manage.py alkstore_worker`` runs the task. See :mod:`.views` and
:mod:`.tasks`.
"""
