"""/docs works without internet: Swagger UI's script and style come from this server (the installed
swagger-ui-bundle package), not a CDN (issue 48 §8: the page was blank offline)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient


def test_docs_page_loads_swagger_ui_from_this_server(client: TestClient) -> None:
    page = client.get("/docs", headers={"Authorization": ""})
    assert page.status_code == 200, page.text[:300]
    assets = re.findall(r"""(?:src|href)=['"]([^'"]+)['"]""", page.text)
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets) and any(a.endswith(".css") for a in assets)
    assert not [a for a in assets if "://" in a or a.startswith("//")], assets  # nothing from another host
    for asset in assets:
        got = client.get(asset, headers={"Authorization": ""})
        assert got.status_code == 200 and len(got.content) > 500, (asset, got.status_code)
    assert "/openapi.json" in page.text and client.get("/openapi.json").status_code == 200
