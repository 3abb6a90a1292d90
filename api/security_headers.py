"""Security headers on every answer [issue 59 item 5]: no page may be framed (X-Frame-Options DENY and CSP
frame-ancestors 'none', OWASP Clickjacking Defense Cheat Sheet), no type sniffing (X-Content-Type-Options nosniff),
and the pages carry a Content-Security-Policy that admits exactly their own inline stylesheet and script (by
SHA-256 hash, CSP Level 3 §8.3 'hash-source') and nothing from elsewhere. Swagger UI (/docs) loads its own files
from this server (`'self'`) and runs one inline initialiser, which its policy admits by hash as well."""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from pathlib import Path

from starlette.datastructures import MutableHeaders
from starlette.types import Message, Receive, Scope, Send

from api.http_middleware import HttpMiddleware

TEMPLATES = Path(__file__).parent / "pages" / "templates"


def csp_hash(text: str) -> str:
    """A CSP hash-source of an inline element's exact text."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def inline_hashes(html: str, tag: str) -> list[str]:
    """The hash-sources of every inline <tag>...</tag> of a document (no src attribute)."""
    return [csp_hash(m[1]) for m in re.finditer(rf"<{tag}>(.*?)</{tag}>", html, flags=re.S)]


@cache
def page_policy() -> str:
    """The pages' policy: their inline style and script come from base.html, static text (no template values)."""
    base = (TEMPLATES / "base.html").read_text(encoding="utf-8")
    styles, scripts = " ".join(inline_hashes(base, "style")), " ".join(inline_hashes(base, "script"))
    return (
        f"default-src 'none'; style-src {styles}; script-src {scripts}; img-src 'self' data:; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )


def docs_policy(html: str) -> str:
    """Swagger UI's page: its own files from this server, its inline initialiser by hash, the spec from 'self'."""
    scripts = " ".join(inline_hashes(html, "script"))
    return (
        f"default-src 'none'; script-src 'self' {scripts}; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; frame-ancestors 'none'"
    )


class SecurityHeaders(HttpMiddleware):
    """ASGI middleware adding the headers to every HTTP answer; an HTML answer gets its page's policy."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        docs = scope.get("path") == "/docs"
        start: Message | None = None

        async def with_headers(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["X-Frame-Options"] = "DENY"
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "same-origin"
                html = headers.get("content-type", "").startswith("text/html")
                if html and not docs:
                    headers["Content-Security-Policy"] = page_policy()
                elif not html:
                    headers["Content-Security-Policy"] = "default-src 'none'; frame-ancestors 'none'"
                if docs:  # the policy needs the body's inline script: hold the start until the body is read
                    start = message
                    return
            elif docs and start is not None and message["type"] == "http.response.body":
                body = message.get("body", b"")
                MutableHeaders(scope=start)["Content-Security-Policy"] = docs_policy(body.decode(errors="replace"))
                await send(start)
                start = None
            await send(message)

        await self.app(scope, receive, with_headers)
