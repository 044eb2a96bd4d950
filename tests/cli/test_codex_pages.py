"""Codex history pages rebuilt on the client: crafted multi-page rollouts cut from a real fixture."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from stash_cli.codex_pages import PageError, index_rollouts, lf_records, resolve_page
from stash_cli.sessions import CODEX, codex_index, newest_sessions
from stash_ingest.adapters.codex import parse_codex
from support.fixtures import real_fixture

FIXTURE = "codex/localpush-codex-desktop-0.104-redacted-compaction-images.jsonl"
IDS = [f"0199{n:04x}-0000-7000-8000-{n:012x}" for n in range(1, 5)]


def _name(rollout_id: str, minute: int) -> str:
    return f"rollout-2026-11-01T10-{minute:02d}-00-{rollout_id}.jsonl"


def _meta(records: list[bytes], base: dict[str, object] | None) -> bytes:
    meta = orjson.loads(records[0])
    if base is not None:
        meta["payload"]["history_base"] = base
    return orjson.dumps(meta) + b"\n"


def _base(rollout_id: str, records: list[bytes]) -> dict[str, object]:
    """A history_base that inherits every record of `records`: their exact count and bytes."""
    return {"thread_id": rollout_id, "end_ordinal_exclusive": len(records), "end_byte_offset": len(b"".join(records))}


def _pages(folder: Path, cuts: tuple[int, int]) -> tuple[list[bytes], list[Path]]:
    """The fixture split into three pages: the first holds records [0, a), the second continues it with
    [a, b) and the third continues the whole second page with [b, end)."""
    records = lf_records(real_fixture(FIXTURE))
    a, b = cuts
    first = [records[0], *records[1:a]]
    second = [_meta(records, _base(IDS[0], first)), *records[a:b]]
    third = [_meta(records, _base(IDS[1], second)), *records[b:]]
    paths = []
    for minute, (rollout_id, page) in enumerate(zip(IDS, (first, second, third), strict=False)):
        path = folder / "2026" / "11" / "01" / _name(rollout_id, minute)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(page))
        os.utime(path, (1_800_000_000 + minute, 1_800_000_000 + minute))
        paths.append(path)
    return records, paths


def test_a_chain_of_pages_rebuilds_the_whole_rollout(tmp_path: Path) -> None:
    records, paths = _pages(tmp_path / "sessions", (20, 45))

    rebuilt = resolve_page(paths[2], codex_index(tmp_path / "sessions"))

    assert lf_records(rebuilt)[1:] == records[1:]
    assert "history_base" not in orjson.loads(lf_records(rebuilt)[0])["payload"]
    assert parse_codex(rebuilt)[0].steps == parse_codex(b"".join(records))[0].steps


@pytest.mark.parametrize("cuts", [(2, 3), (10, 11), (38, 75)])
def test_every_cut_at_a_record_boundary_rebuilds_exactly(tmp_path: Path, cuts: tuple[int, int]) -> None:
    records, paths = _pages(tmp_path / "sessions", cuts)

    assert lf_records(resolve_page(paths[2], codex_index(tmp_path / "sessions")))[1:] == records[1:]


def test_a_page_that_is_not_the_newest_rebuilds_to_its_own_end(tmp_path: Path) -> None:
    records, paths = _pages(tmp_path / "sessions", (20, 45))

    assert lf_records(resolve_page(paths[1], codex_index(tmp_path / "sessions")))[1:] == records[1:45]


def test_a_rollout_without_a_base_is_uploaded_as_it_is(tmp_path: Path) -> None:
    _, paths = _pages(tmp_path / "sessions", (20, 45))

    assert resolve_page(paths[0], {}) == paths[0].read_bytes()


def test_unicode_line_separators_stay_inside_their_record(tmp_path: Path) -> None:
    records = lf_records(real_fixture(FIXTURE))
    text = orjson.loads(records[1])
    text["payload"]["note"] = "one\u2028two\u2029three"
    first = [records[0], orjson.dumps(text) + b"\n", *records[2:5]]
    base_path = tmp_path / _name(IDS[0], 0)
    base_path.write_bytes(b"".join(first))
    page = tmp_path / _name(IDS[1], 1)
    page.write_bytes(_meta(records, _base(IDS[0], first)) + b"".join(records[5:9]))

    rebuilt = lf_records(resolve_page(page, index_rollouts([base_path, page])))

    assert len(rebuilt) == 1 + 4 + 4  # its own session_meta, the inherited records, its own records
    assert orjson.loads(rebuilt[1])["payload"]["note"] == "one\u2028two\u2029three"


@pytest.mark.parametrize(
    ("shift", "expected"),
    [
        ({"end_byte_offset": -1}, "ends at byte"),
        ({"end_byte_offset": 1}, "ends at byte"),
        ({"end_ordinal_exclusive": -1}, "ends at byte"),
    ],
)
def test_a_base_boundary_off_by_anything_is_refused(tmp_path: Path, shift: dict[str, int], expected: str) -> None:
    records, paths = _pages(tmp_path / "sessions", (20, 45))
    meta = orjson.loads(lf_records(paths[1].read_bytes())[0])
    base = meta["payload"]["history_base"]
    for key, delta in shift.items():
        base[key] += delta
    paths[1].write_bytes(orjson.dumps(meta) + b"\n" + b"".join(records[20:45]))

    with pytest.raises(PageError, match=expected):
        resolve_page(paths[1], codex_index(tmp_path / "sessions"))


def test_a_base_past_the_end_of_its_file_is_refused(tmp_path: Path) -> None:
    records, paths = _pages(tmp_path / "sessions", (20, 45))
    base = {"thread_id": IDS[0], "end_ordinal_exclusive": 21, "end_byte_offset": len(b"".join(records[:21]))}
    paths[1].write_bytes(_meta(records, base) + b"".join(records[21:45]))

    with pytest.raises(PageError, match="has 20 records"):
        resolve_page(paths[1], codex_index(tmp_path / "sessions"))


def test_a_missing_base_is_refused(tmp_path: Path) -> None:
    _, paths = _pages(tmp_path / "sessions", (20, 45))
    paths[0].unlink()

    with pytest.raises(PageError, match=f"{IDS[0]} is not on this machine"):
        resolve_page(paths[2], codex_index(tmp_path / "sessions"))


def test_an_ambiguous_base_is_refused_and_equal_copies_are_not(tmp_path: Path) -> None:
    _, paths = _pages(tmp_path / "sessions", (20, 45))
    archived = tmp_path / "archived_sessions" / paths[0].name
    archived.parent.mkdir()
    archived.write_bytes(paths[0].read_bytes())
    resolve_page(paths[2], codex_index(tmp_path / "sessions"))  # an equal copy is the same base
    archived.write_bytes(paths[0].read_bytes() + b'{"type":"event_msg","payload":{}}\n')

    with pytest.raises(PageError, match="ambiguous"):
        resolve_page(paths[2], codex_index(tmp_path / "sessions"))


def test_a_base_that_leads_back_to_the_page_is_refused(tmp_path: Path) -> None:
    records = lf_records(real_fixture(FIXTURE))
    page = tmp_path / "sessions" / _name(IDS[0], 0)
    page.parent.mkdir()
    page.write_bytes(_meta(records, {"thread_id": IDS[0], "end_ordinal_exclusive": 1, "end_byte_offset": 1}))

    with pytest.raises(PageError, match="back to itself"):
        resolve_page(page, codex_index(tmp_path / "sessions"))


def test_a_malformed_base_is_refused(tmp_path: Path) -> None:
    records = lf_records(real_fixture(FIXTURE))
    page = tmp_path / "sessions" / _name(IDS[0], 0)
    page.parent.mkdir()
    page.write_bytes(_meta(records, {"thread_id": IDS[1], "end_ordinal_exclusive": "3"}))

    with pytest.raises(PageError, match="history_base must be"):
        resolve_page(page, codex_index(tmp_path / "sessions"))


def test_history_imports_pick_the_newest_page_of_each_session(tmp_path: Path) -> None:
    codex = tmp_path / "sessions"
    _, paths = _pages(codex, (20, 45))
    other = codex / _name(IDS[3], 9)
    other.write_bytes(real_fixture("codex/codemie-codex-tui-0.125-rollout.jsonl"))
    os.utime(paths[1], (1_900_000_000, 1_900_000_000))  # the middle page was written last

    chosen = newest_sessions(tmp_path / "no-claude", codex)

    assert sorted(session.path for session in chosen) == sorted([paths[1], other])
    assert {session.format for session in chosen} == {CODEX}
