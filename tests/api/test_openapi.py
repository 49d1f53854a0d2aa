"""The committed openapi.json is the app's spec (regenerate with `make openapi` / `make client`)."""

from __future__ import annotations

from pathlib import Path

import orjson

from app.openapi_export import render, spec

REPO = Path(__file__).resolve().parents[2]


def test_committed_spec_is_current() -> None:
    committed = (REPO / "openapi.json").read_bytes()
    assert orjson.loads(committed) == orjson.loads(render()), "openapi.json is stale: run `make openapi`"


def test_operation_ids_are_stable_and_unique() -> None:
    ops = [op["operationId"] for path in spec()["paths"].values() for op in path.values()]
    assert len(ops) == len(set(ops))
    for expected in (
        "produce",
        "receive",
        "ackMessages",
        "nackMessages",
        "getTopicStats",
        "getInternalStats",
    ):
        assert expected in ops


def test_no_input_output_split_and_bodies_documented() -> None:
    s = spec()
    names = s["components"]["schemas"].keys()
    assert not [n for n in names if n.endswith(("-Input", "-Output"))]
    body = s["paths"]["/v1/topics/{tenant}/{namespace}/{topic}/messages"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ProduceRequest"}
    assert "examples" in s["components"]["schemas"]["ProduceRequest"]


def test_every_operation_is_tagged_and_errors_are_problems() -> None:
    for path, ops in spec()["paths"].items():
        for method, op in ops.items():
            assert op.get("tags"), f"{method} {path} has no tag"
            for status, response in op["responses"].items():
                if status.startswith(("4", "5")) and path != "/readyz":
                    assert "application/problem+json" in response["content"], (method, path, status)
