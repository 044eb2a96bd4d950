"""The OpenAPI document says what the gateway accepts: every JSON request body is closed to undeclared fields."""

from pathlib import Path
from typing import Any

import pytest

from stash_common.settings import load
from stash_gateway.app import create_app
from stash_gateway.settings import GatewaySettings


@pytest.fixture
def document(tmp_path: Path) -> dict[str, Any]:
    return create_app(load(GatewaySettings, data_dir=tmp_path)).openapi()


def _objects(schema: dict[str, Any], schemas: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every object schema a request body reaches (through $ref, anyOf, items and properties), by name."""
    found, pending, seen = [], [schema], set()
    while pending:
        node = pending.pop()
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[1]
            if name not in seen:
                seen.add(name)
                found.append((name, schemas[name]))
                pending.append(schemas[name])
            continue
        pending += [*node.get("anyOf", []), *node.get("properties", {}).values()]
        pending += [node["items"]] if isinstance(node.get("items"), dict) else []
    return found


def test_every_json_request_body_declares_additional_properties_false(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    bodies = [
        operation["requestBody"]["content"]["application/json"]["schema"]
        for path in document["paths"].values()
        for operation in path.values()
        if "$ref" in operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    ]
    objects = dict(item for body in bodies for item in _objects(body, schemas))

    assert len(bodies) >= 12 and {"RewardModelBody", "TrainingConfigBody", "QuoteBody"} <= set(objects)
    assert {name: schema.get("additionalProperties") for name, schema in objects.items()} == dict.fromkeys(
        objects, False
    )
