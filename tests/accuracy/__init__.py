"""Tests of the published-run harness (accuracy/)."""
