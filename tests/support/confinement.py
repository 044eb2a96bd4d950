"""Torch stays inside the worker packages: import a service's other modules in a fresh process and look."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

# Every module of the package but the skipped ones, found on disk so that a new module is covered
# without editing a list.
_PROBE = """
import importlib, json, pkgutil, sys
package, skipped = sys.argv[1], set(sys.argv[2:])

def modules(path, prefix):
    for info in pkgutil.iter_modules(path, prefix):
        if info.name in skipped:
            continue
        module = importlib.import_module(info.name)
        yield info.name
        if info.ispkg:
            yield from modules(module.__path__, info.name + ".")

imported = list(modules(importlib.import_module(package).__path__, package + "."))
heavy = sorted(name for name in ("torch", "transformers") if name in sys.modules)
print(json.dumps({"imported": imported, "heavy": heavy}))
"""


@dataclass(frozen=True)
class Probe:
    """What importing a package's modules in a fresh interpreter loaded."""

    imported: list[str]
    heavy: list[str]


def import_without(package: str, *skipped: str) -> Probe:
    """Import every module of `package` except `skipped` (and their submodules) in a new process."""
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, package, *skipped], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return Probe(**json.loads(result.stdout.splitlines()[-1]))
