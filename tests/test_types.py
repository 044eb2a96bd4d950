"""mypy, configured in pyproject.toml, finds no type error in services/, common/ or cli/."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_errors() -> None:
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent))
    assert mypy, "mypy is part of the [dev] extra"

    result = subprocess.run([mypy], cwd=ROOT, capture_output=True, text=True, timeout=600)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout
