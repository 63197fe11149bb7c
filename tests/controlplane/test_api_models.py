"""The API's typed contract: a real OpenAPI schema, one error body for every 4xx,
JSON whatever the Content-Type, hostile input answered 4xx (never 500), and unit
warnings in the registration's answer."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from controlplane.api import make_app
from controlplane.apimodels import ErrorBody
from controlplane.controller import Controller
from controlplane.openapi import schema
from tests.controlplane.helpers import spec
from tests.controlplane.inproc import running_controller


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with running_controller(tmp_path) as c:
        yield TestClient(make_app(c, token=None), raise_server_exceptions=False)


def is_error_body(r: Any) -> bool:
    body = r.json()
    ErrorBody.model_validate(body)
    return set(body) == {"detail", "field", "message"}


def test_schema_is_real() -> None:
    doc = schema()
    comps = doc["components"]["schemas"]
    body = doc["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    refs = {r["$ref"].rsplit("/", 1)[1] for r in body["oneOf"]}
    assert {"GpipeJob", "HybridJob", "ExplicitJob"} <= refs <= set(comps)
    assert comps["GpipeJob"]["additionalProperties"] is False
    assert comps["GpipeJob"]["properties"]["paradigm"]["const"] == "gpipe"
    ok = doc["paths"]["/stats"]["get"]["responses"]["200"]["content"]["application/json"]
    assert ok["schema"] == {"$ref": "#/components/schemas/StatsView"}
    assert "priority" in comps["StatsGroup"]["properties"]
    assert "warnings" in comps["JobView"]["properties"]
    # every declared 4xx is the one error body; FastAPI's own 422 shape is gone
    assert "HTTPValidationError" not in comps
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for code, resp in op["responses"].items():
                if code.startswith("4"):
                    got = resp["content"]["application/json"]["schema"]
                    assert got == {"$ref": "#/components/schemas/ErrorBody"}, (path, method, code)


def test_json_whatever_the_content_type(client: TestClient) -> None:
    """``curl -d @job.json`` sends application/x-www-form-urlencoded."""
    body = json.dumps(spec("formjob"))
    for ctype in ("application/x-www-form-urlencoded", "text/plain", None):
        headers = {"content-type": ctype} if ctype else {}
        r = client.post("/jobs", content=body.replace("formjob", f"j{len(ctype or '')}"),
                        headers=headers)  # fmt: skip
        assert r.status_code == 201, r.text
    r = client.put("/policy", content='{"name": "coflow"}',
                   headers={"content-type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert r.status_code == 200 and r.json()["policy"] == "coflow"


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ('{"job": "a\\ud800", "echelonflows": []}', 422, "job"),  # lone surrogate, a limit
        (  # a group name is limited like a job name
            json.dumps({**spec("s"), "job": "ok"}).replace('"g0"', '"g\\ud800"'),
            422,
            "echelonflows[0].group",
        ),
        ('{"job": "s", "zz\\udfff": 1, "echelonflows": []}', 400, "zz"),  # echoed key
        (json.dumps(spec("big")).replace("10000", "1" + "0" * 400), 400, "size"),
        (json.dumps(spec("big")).replace("10000", "1e400"), 400, "size"),
        ('{"job": "x", "paradigm": "gpipe", "micro_batches": ' + "9" * 5000 + "}", 422, "body"),
        ("[1, 2]", 422, "body"),
        ("{not json", 422, "body"),
    ],
)
def test_hostile_bodies_are_4xx_with_the_error_body(
    client: TestClient, body: str, code: int, field: str | None
) -> None:
    r = client.post("/jobs", content=body, headers={"content-type": "application/json"})
    assert r.status_code == code, r.text
    assert is_error_body(r)
    if field is not None:
        assert field in r.json()["field"], r.json()


def test_every_error_has_the_one_body(client: TestClient, tmp_path: Path) -> None:
    for r in (
        client.get("/nowhere"),
        client.delete("/policy"),
        client.get("/jobs/nope"),
        client.post("/progress?wait=maybe", json={}),
        client.put("/policy", json={"nam": "fifo"}),
    ):
        assert 400 <= r.status_code < 500 and is_error_body(r), r.text
    assert client.put("/policy", json={"nam": "fifo"}).json()["field"] == "nam"


def test_unauthorised_has_the_one_body(tmp_path: Path) -> None:
    with running_controller(tmp_path) as c:
        r = TestClient(make_app(c, token="t0k")).get("/jobs")
    assert r.status_code == 401 and is_error_body(r) and r.json()["field"] == "authorization"


def test_registration_answers_unit_warnings(client: TestClient) -> None:
    slow = copy.deepcopy(spec("slow"))
    slow["echelonflows"][0]["flows"][1]["offset"] = 30  # seconds meant as ms?
    r = client.post("/jobs", json=slow)
    assert r.status_code == 201, r.text
    warnings = r.json()["warnings"]
    assert len(warnings) == 1 and warnings[0].startswith("echelonflows[0].flows[1].offset: ")
    ok = client.post("/jobs", json=spec("fine")).json()
    assert ok["warnings"] == []


def test_answers_validate_against_their_models(client: TestClient, ctl_types: Any = None) -> None:
    from controlplane.apimodels import JobView, PolicyView, StatsView, StatusView

    assert client.post("/jobs", json=spec("typed", groups=2)).status_code == 201
    view = JobView.model_validate(client.get("/jobs/typed").json())
    assert [g.group for g in view.groups] == ["g0", "g1"] and view.echelonflows
    stats = StatsView.model_validate(client.get("/stats").json())
    assert {g.group for g in stats.groups} == {"g0", "g1"}
    assert {g.priority for g in stats.groups} == {g.priority for g in view.groups}
    StatusView.model_validate(client.get("/status").json())
    PolicyView.model_validate(client.get("/policy").json())


def test_controller_is_untouched_by_refused_bodies(tmp_path: Path) -> None:
    with running_controller(tmp_path) as c:
        tc = TestClient(make_app(c), raise_server_exceptions=False)
        tc.post("/jobs", content='{"job": "a\\ud800", "echelonflows": []}')
        assert isinstance(c, Controller) and c.jobs() == []
