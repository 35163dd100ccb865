"""alkstore's conformance suite: the behaviour contract as a pytest plugin plus test modules.

Run it against any backend with ``alkstore conformance --dsn ... --engine ...`` or under
plain pytest with ``-p alkstore.conformance --pyargs alkstore.conformance.suite``. The plugin
is opt-in: installing alkstore does not load it into anyone's pytest run.
"""

pytest_plugins = ["alkstore.conformance.plugin"]
"""What ``pytest -p alkstore.conformance`` loads: pytest reads this list of a ``-p`` module."""
