"""The pages tests use the API tests' fixtures (a real PostgreSQL database, tokens, the in-process app)."""

from tests.api.conftest import api_db, api_db_url, api_settings, client, server, tokens  # noqa: F401
