"""Celery app and thin tasks that run planning jobs."""
