"""``alkstore_worker``."""
