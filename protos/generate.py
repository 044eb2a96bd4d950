"""Regenerate the Python code of the Stash RM protos into protos/gen/python.

Run it as `make protos` (or `python protos/generate.py`). It needs the pinned
dev tools, grpcio-tools==1.85.1 and mypy-protobuf==5.1.0, in the running
Python. It writes, for every protos/stash/rm/v1/*.proto:

    *_pb2.py, *_pb2_grpc.py       grpc_tools.protoc (--python_out, --grpc_python_out)
    *_pb2.pyi, *_pb2_grpc.pyi     mypy-protobuf (--mypy_out, --mypy_grpc_out)

plus empty `__init__.py` files so that `from stash.rm.v1 import ingest_pb2`
works with protos/gen/python on the path, and `py.typed` for type checkers.

The output is deterministic: protoc runs with the protos directory as its only
project include path, so every file is known by its virtual name
(stash/rm/v1/x.proto) and no absolute path reaches the generated code.
tests/test_protos.py calls `generate(tmp_dir)` and diffs the result against
the checked-in code.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import sys
import tempfile
from pathlib import Path

PROTOS_DIR = Path(__file__).resolve().parent
DEFAULT_OUT_DIR = PROTOS_DIR / "gen" / "python"
PACKAGE_DIRS = ("stash", "stash/rm", "stash/rm/v1")
PINNED_TOOLS = {"grpcio-tools": "1.85.1", "mypy-protobuf": "5.1.0"}


class GenerateError(RuntimeError):
    """The generator could not run or protoc reported an error."""


def proto_files() -> list[str]:
    """Every .proto under protos/stash, relative to protos/, sorted."""
    return sorted(p.relative_to(PROTOS_DIR).as_posix() for p in (PROTOS_DIR / "stash").rglob("*.proto"))


def _check_tools() -> None:
    """Fail clearly when the pinned generator versions are not the ones installed."""
    for name, wanted in PINNED_TOOLS.items():
        try:
            found = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found = None
        if found != wanted:
            raise GenerateError(
                f"protos/generate.py needs {name}=={wanted} (found {found or 'nothing'}) in {sys.executable}. "
                f"Please install the dev tools: pip install '{name}=={wanted}'"
            )


def _plugin(name: str) -> str:
    """Path of a protoc plugin script installed next to the running Python, or on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise GenerateError(
            f"protoc plugin {name} not found next to {sys.executable} or on PATH. "
            "Please install mypy-protobuf==5.1.0 into this Python."
        )
    return found


def generate(out_dir: Path | str = DEFAULT_OUT_DIR) -> list[Path]:
    """Regenerate all code into `out_dir`, replacing its `stash/` tree; return the files written, sorted."""
    _check_tools()
    from grpc_tools import protoc  # imported late: the version check above explains a missing install

    out_dir = Path(out_dir)
    files = proto_files()
    if not files:
        raise GenerateError(f"no .proto files under {PROTOS_DIR / 'stash'}")
    bundled = Path(protoc.__file__).resolve().parent / "_proto"  # google/protobuf/*.proto
    with tempfile.TemporaryDirectory(prefix="stash-protos-") as tmp:
        staging = Path(tmp)
        args = [
            "grpc_tools.protoc",
            f"--proto_path={PROTOS_DIR}",
            f"--proto_path={bundled}",
            f"--plugin=protoc-gen-mypy={_plugin('protoc-gen-mypy')}",
            f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
            f"--python_out={staging}",
            f"--grpc_python_out={staging}",
            f"--mypy_out=quiet:{staging}",
            f"--mypy_grpc_out=quiet:{staging}",
            # Physical paths inside --proto_path map to their virtual names (stash/rm/v1/x.proto),
            # so the generated code never mentions where the checkout lives.
            *(str(PROTOS_DIR / name) for name in files),
        ]
        rc = protoc.main(args)
        if rc != 0:
            raise GenerateError(f"protoc failed with exit status {rc} (its errors are printed above)")
        for package in PACKAGE_DIRS:
            (staging / package).mkdir(parents=True, exist_ok=True)
            (staging / package / "__init__.py").write_bytes(b"")
        (staging / "stash" / "py.typed").write_bytes(b"")

        target = out_dir / "stash"
        if target.exists():
            shutil.rmtree(target)
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staging / "stash", target)
    return sorted(p for p in target.rglob("*") if p.is_file())


def main() -> int:
    """Entry point of `make protos`."""
    try:
        written = generate()
    except GenerateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    root = PROTOS_DIR.parent
    for path in written:
        print(path.relative_to(root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
