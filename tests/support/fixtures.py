"""Where the real trace files live: ../shared/fixtures/real beside the repository."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
REAL_FIXTURES = REPO_ROOT.parent / "shared" / "fixtures" / "real"


def real_fixture(relative: str) -> bytes:
    """The bytes of one real fixture file, e.g. `codex/…-rollout.jsonl`."""
    return (REAL_FIXTURES / relative).read_bytes()
