"""Database layer (models and repositories), shared by api and workers."""
