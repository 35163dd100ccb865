"""No models: alkstore's tables are its own schema's, installed by ``manage.py migrate``
through the post_migrate signal, which Django sends only to apps that have a models module."""
