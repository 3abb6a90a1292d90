"""The web pages (filled in by the pages issue)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(include_in_schema=False)
