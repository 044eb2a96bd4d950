"""Strict validation of Kubernetes manifests against the JSON schemas kubernetes-validate carries offline."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import kubernetes_validate


def strict_validation_errors(documents: Iterable[dict[str, Any]]) -> list[str]:
    """`Kind name: problem` for each manifest the latest schemas refuse in strict mode (unknown fields too)."""
    version = kubernetes_validate.latest_version()
    errors = []
    for document in documents:
        try:
            kubernetes_validate.validate(document, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            errors.append(f"{document['kind']} {document['metadata']['name']}: {error.message}")
    return errors
