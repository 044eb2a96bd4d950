"""The scorer service process: every module outside the worker imports without torch or transformers."""

import subprocess
import sys

# Imports every module of stash_scorer but the worker package (which runs inside scoring jobs) and
# __main__ (which serves), found on disk so that a new module is covered without editing a list.
PROBE = """
import importlib, pkgutil, sys
import stash_scorer

def modules(path, prefix):
    for info in pkgutil.iter_modules(path, prefix):
        if info.name in ("stash_scorer.worker", "stash_scorer.__main__"):
            continue
        module = importlib.import_module(info.name)
        yield info.name
        if info.ispkg:
            yield from modules(module.__path__, info.name + ".")

imported = list(modules(stash_scorer.__path__, "stash_scorer."))
print("imported:", len(imported), "stash_scorer.job_contract" in imported, "stash_scorer.main" in imported)
print("heavy:", sorted(name for name in ("torch", "transformers") if name in sys.modules))
"""


def test_service_modules_never_load_torch_or_transformers() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)

    assert result.returncode == 0, result.stderr
    assert "True True" in result.stdout and "heavy: []" in result.stdout
