"""The /v1 resources."""
