"""Security headers [issue 59 item 5]: no answer may be framed, the pages' Content-Security-Policy admits exactly
their own inline stylesheet and script (the hashes of what the page holds, so a changed base.html cannot silently
break them), and the login cookie is Secure behind TLS, SameSite=Strict and HttpOnly always."""

from __future__ import annotations

from fastapi.testclient import TestClient

from api.app import create_app
from api.security_headers import inline_hashes
from store.db import Database
from store.settings import Settings


def test_every_answer_refuses_to_be_framed(client: TestClient) -> None:
    for path in ("/healthz", "/v1/clusters", "/login", "/docs", "/openapi.json", "/no-such-page"):
        r = client.get(path)
        assert r.headers["X-Frame-Options"] == "DENY", path
        assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"], path
        assert r.headers["X-Content-Type-Options"] == "nosniff", path


def test_a_page_policy_admits_its_own_inline_style_and_script_and_nothing_else(client: TestClient) -> None:
    page = client.get("/login")
    assert page.status_code == 200
    policy = dict(part.strip().split(" ", 1) for part in page.headers["Content-Security-Policy"].split(";"))
    assert policy["default-src"] == "'none'"
    assert set(policy["style-src"].split()) == set(inline_hashes(page.text, "style")) != set()
    assert set(policy["script-src"].split()) == set(inline_hashes(page.text, "script")) != set()
    assert "'unsafe-inline'" not in page.headers["Content-Security-Policy"]
    docs = client.get("/docs")
    scripts = docs.headers["Content-Security-Policy"].split("script-src ")[1].split(";")[0].split()
    assert scripts[0] == "'self'" and set(scripts[1:]) == set(inline_hashes(docs.text, "script")) != set()


def test_the_login_cookie_is_secure_behind_tls(
    api_settings: Settings, api_db: Database, tokens: dict[str, str]
) -> None:
    app = create_app(api_settings, api_db)
    for base, secure in (("https://meshplan.example", True), ("http://testserver", False)):
        with TestClient(app, base_url=base) as c:
            r = c.post("/login", data={"token": tokens["read"], "next": "/plans"}, follow_redirects=False)
        assert r.status_code == 303, r.text
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert ("; secure" in cookie) is secure, (base, cookie)
