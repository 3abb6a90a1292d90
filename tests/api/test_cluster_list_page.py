"""The clusters list page is served from the head revisions' summary columns: it neither reads nor parses any
inventory [issue 37 item 4: it validated each of up to 200 inventories, a cluster at the node cap's in seconds]."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from optimizer.spec.cluster_spec import ClusterSpec
from store.db import Database
from tests.api.helpers import make_cluster


def test_the_cluster_list_reads_no_inventory(
    client: TestClient, api_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    pools = [
        {"name": "a", "gpu": "H100-SXM-80GB", "gpus_per_node": 8, "nodes": 3, "node_states": {"a-000": "drained"}},
        {"name": "b", "gpu": "A100-SXM-80GB", "gpus_per_node": 8, "nodes": [{"name": f"b{i}"} for i in range(2)]},
        {"name": "c", "gpu": "H100-SXM-80GB", "gpus_per_node": 4, "nodes": 1},
    ]
    cluster = make_cluster(client, {"pools": pools})
    parsed: list[Any] = []
    validate = ClusterSpec.model_validate.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ClusterSpec], *a: Any, **kw: Any) -> ClusterSpec:
        parsed.append(a)
        return validate(cls, *a, **kw)  # type: ignore[no-any-return]

    monkeypatch.setattr(ClusterSpec, "model_validate", classmethod(counted))
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(api_db.engine, "before_cursor_execute", seen)
    try:
        html = client.get("/clusters").text
    finally:
        event.remove(api_db.engine, "before_cursor_execute", seen)
    row = html[html.index(f'<a href="/clusters/{cluster["id"]}">') :]
    row = row[: row.index("</tr>")]
    # healthy: 2 x 8 (a) + 2 x 8 (b) + 4 (c); all: 3 x 8 + 2 x 8 + 4; the GPU types once each, in pool order
    assert '<td class="num">36</td><td class="num">44</td>' in row
    assert "<td>H100-SXM-80GB, A100-SXM-80GB</td>" in row
    assert parsed == [], "the list page parsed inventories"
    reads = [s for s in statements if "cluster_revisions" in s]
    assert reads and not any("cluster_revisions.spec" in s for s in reads), reads
