"""Where the real trace files live: tests/fixtures/real, with their SOURCES.md and FORMAT_NOTES.md."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
REAL_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "real"


def real_fixture(relative: str) -> bytes:
    """The bytes of one real fixture file, e.g. `codex/…-rollout.jsonl`."""
    return (REAL_FIXTURES / relative).read_bytes()
