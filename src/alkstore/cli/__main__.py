"""``python -m alkstore.cli``: the same as the ``alkstore`` command."""

import sys

from . import main

sys.exit(main())
