"""A Django project that enqueues inside ``transaction.atomic()`` on Django's own connection.

``POST /orders`` saves an ``Order`` and sends its confirmation job in the same transaction:
``store.using(connection.connection)`` puts the store on the psycopg 3 connection Django's
``atomic()`` block is running on. See :mod:`.views`.
"""
