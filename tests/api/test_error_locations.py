"""Error locations: a dotted field becomes location steps, a file name stays one step (issue 37 item 6)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api.errors import field_steps
from tests.api.helpers import LLAMA_HF, name


@pytest.mark.parametrize(
    ("field", "steps"),
    [
        ("config.json.hidden_act", ["config.json", "hidden_act"]),
        ("config.json", ["config.json"]),
        ("model.yaml", ["model.yaml"]),
        ("config.tp", ["config", "tp"]),
        ("sinfo[0].nodes.nodes", ["sinfo[0]", "nodes", "nodes"]),
        ("", []),
    ],
)
def test_a_file_name_is_one_location_step(field: str, steps: list[str]) -> None:
    assert field_steps(field) == steps


def test_a_bad_hf_config_is_located_at_the_hf_config_field(client: TestClient) -> None:
    r = client.post("/v1/models", json={"name": name("m"), "hf_config": {**LLAMA_HF, "hidden_act": 5}})
    assert r.status_code == 422, r.text
    (item,) = r.json()["detail"]
    assert item["loc"] == ["body", "hf_config", "hidden_act"] and "string" in item["msg"], item
    model = client.post("/v1/models", json={"name": name("m"), "hf_config": LLAMA_HF})
    assert model.status_code == 201, model.text
    r = client.post(f"/v1/models/{model.json()['id']}/versions", json={"hf_config": {"model_type": "nope"}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "hf_config", "model_type"], r.text
