"""alkstore's conformance suite: the behaviour contract as a pytest plugin plus test modules.

Run it against any backend with ``alkstore conformance --dsn ... --engine ...`` or under
plain pytest with ``-p alkstore.conformance.plugin --pyargs alkstore.conformance.suite``.
"""
