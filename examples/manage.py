"""Django's command line for the example project: ``SHOP_DSN=postgresql://… python manage.py
migrate`` (Django's tables and alkstore's schema), ``runserver``, ``alkstore_worker``."""

import os
import sys

from django.core.management import execute_from_command_line

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "django_shop.settings")
    execute_from_command_line(sys.argv)
