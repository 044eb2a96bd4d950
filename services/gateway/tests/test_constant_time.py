"""Credential checks never compare a presented secret with `==`: keys are found by their digest, and the admin
key, signed URLs and CSRF tokens are compared with `hmac.compare_digest` (constant time)."""

import ast
import inspect

import pytest

from stash_common import storage
from stash_gateway import auth, store
from stash_gateway.routes import admin

SECRET_WORDS = ("secret", "signature", "token", "credential", "expected", "digest", "sent")


def _equality_on_secrets(module: object) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):  # type: ignore[arg-type]
        if isinstance(node, ast.Compare) and any(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops):
            text = ast.unparse(node)
            if any(word in text.lower() for word in SECRET_WORDS):
                found.append(text)
    return found


# `store` is left out: its one equality is the SQL lookup by digest, checked below.
@pytest.mark.parametrize("module", [auth, admin, storage], ids=lambda module: module.__name__)
def test_no_secret_is_compared_with_equality(module: object) -> None:
    assert _equality_on_secrets(module) == []


def test_keys_are_looked_up_by_digest_and_the_others_compared_in_constant_time() -> None:
    assert "key_digest == digest(secret)" in inspect.getsource(store.find_principal)
    for module in (admin, storage):
        assert "hmac.compare_digest" in inspect.getsource(module)
