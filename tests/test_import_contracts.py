"""The dependency direction of STYLE.md, enforced by import-linter's contracts in pyproject.toml."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is part of the [dev] extra"

    result = subprocess.run([lint_imports], cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
