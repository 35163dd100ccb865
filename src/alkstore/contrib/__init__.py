"""Integrations with web frameworks: :mod:`alkstore.contrib.django` (a Django app).

FastAPI needs no module of its own: its recipe is a dependency of a few lines
(docs/frameworks.md)."""
