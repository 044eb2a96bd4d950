"""The labeler's evaluations end to end over real gRPC: ingest announces, the worker labels, scores and saves."""

import re
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import openai
import orjson
import pytest
from fakes.llm_server import FakeLLM
from sqlalchemy import select

from stash.rm.v1 import common_pb2, ingest_pb2, labeler_pb2, labeler_pb2_grpc
from stash_common.channels import open_channel
from stash_common.db import transaction
from stash_common.errors import Unavailable
from stash_ingest.clients import LabelerClient
from stash_ingest.revisions import Announcer
from stash_ingest.titles import derive_title
from stash_labeler import store
from stash_labeler.labeling.llm import OpenAILabeler
from stash_labeler.labeling.rule_labeler import RuleLabeler
from support.claude_code import looping_test_session
from support.fixtures import REAL_FIXTURES
from support.ingest import OTHER_OWNER, OWNER, import_payload, serve_ingest, stash_line
from support.labeler import CountingLabeler, RunningLabeler, serve_labeler
from support.processes import free_port
from support.scorer import wait_until

CLAUDE_CODE = REAL_FIXTURES / "claude-code"


@pytest.fixture
def wired(postgres_url: str) -> Iterator[Callable[..., tuple[Any, RunningLabeler]]]:
    """Start ingest announcing to a labeler on the same database; returns (ingest stub, labeler)."""
    stops: list[Callable[[], None]] = []

    def start(labeler: Any = None, announce: bool = True, **options: Any) -> tuple[Any, RunningLabeler]:
        port = free_port()
        labeler_client = LabelerClient(labeler_pb2_grpc.LabelerServiceStub(open_channel(f"127.0.0.1:{port}")))
        announcer = Announcer(labeler_client.announce_revisions)
        ingest, stop_ingest = serve_ingest(postgres_url, derive_title, announcer if announce else None)
        running = serve_labeler(postgres_url, ingest, labeler or RuleLabeler(), port=port, **options)
        stops.extend([running.stop, stop_ingest])
        return ingest, running

    yield start
    for stop in stops:
        stop()


def evaluation(
    labeler: RunningLabeler,
    trace_id: str,
    revision: int | None = None,
    timeout_s: float = 15,
    accept_failed: bool = True,
) -> Any:
    """The evaluation of the trace (at `revision`), once it has finished (succeeded only, unless `accept_failed`)."""
    deadline = time.monotonic() + timeout_s
    request = labeler_pb2.GetTraceEvaluationRequest(owner_id=OWNER, trace_id=trace_id, revision=revision)
    while time.monotonic() < deadline:
        found = labeler.stub.GetTraceEvaluation(request, timeout=10)
        finished = [common_pb2.JOB_STATUS_SUCCEEDED] + ([common_pb2.JOB_STATUS_FAILED] if accept_failed else [])
        if found.HasField("evaluation") and found.evaluation.status in finished:
            return found.evaluation
        time.sleep(0.05)
    raise TimeoutError(f"trace {trace_id} was not evaluated within {timeout_s}s")


def test_an_imported_trace_is_labeled_and_scored(wired: Callable[..., tuple[Any, RunningLabeler]]) -> None:
    ingest, labeler = wired()
    trace_id = import_payload(ingest, stash_line("refund")).trace_ids[0]

    found = evaluation(labeler, trace_id)

    assert found.status == common_pb2.JOB_STATUS_SUCCEEDED
    assert found.labeler == "rules"
    assert [step.label.actor for step in found.steps] == ["user", "agent", "agent", "agent"]
    call = found.steps[1]
    assert (call.label.type, call.label.result, call.reward.points) == ("lookup", "ok", pytest.approx(-0.03))
    assert found.steps[2].chunk_id == call.chunk_id  # the tool result belongs to its call's chunk
    answer = found.steps[3]
    assert (answer.label.type, answer.label.outcome) == ("answer", "done")
    # Nobody reacted: the answer earns the unconfirmed points, the trace is a partial success.
    assert answer.reward.points == pytest.approx(0.2)
    assert found.trace_score == pytest.approx(0.2 - 0.03)
    assert found.outcome == common_pb2.OUTCOME_PARTIAL_SUCCESS
    assert [task.score for task in found.task_scores] == [pytest.approx(0.17)]


def test_a_reaction_in_a_reimport_makes_a_new_revision_with_its_own_evaluation(
    wired: Callable[..., tuple[Any, RunningLabeler]],
) -> None:
    ingest, labeler = wired()
    first = orjson.loads(stash_line("refund"))
    trace_id = import_payload(ingest, orjson.dumps(first).decode()).trace_ids[0]
    assert evaluation(labeler, trace_id, 1).outcome == common_pb2.OUTCOME_PARTIAL_SUCCESS

    grown = {**first, "steps": [*first["steps"], {"role": "user", "content": "Perfect, thank you!"}]}
    import_payload(ingest, orjson.dumps(grown).decode())
    second = evaluation(labeler, trace_id, 2)

    assert second.outcome == common_pb2.OUTCOME_SUCCESS
    assert second.trace_score == pytest.approx(1.0 - 0.03)
    # The accepted answer passes 0.3 × 1.0 back to the lookup before it.
    assert second.steps[1].reward.passed_back == pytest.approx(0.3)
    assert evaluation(labeler, trace_id, 1).outcome == common_pb2.OUTCOME_PARTIAL_SUCCESS  # history kept


def _claude_code_lines() -> list[str]:
    path = sorted(CLAUDE_CODE.glob("*.jsonl"))[0]
    return path.read_text(encoding="utf-8").splitlines()


def test_a_growing_trace_labels_only_its_new_chunks(wired: Callable[..., tuple[Any, RunningLabeler]]) -> None:
    counting = CountingLabeler()
    ingest, labeler = wired(counting)
    lines = _claude_code_lines()
    half = "\n".join(lines[: len(lines) // 2])
    trace_id = import_payload(ingest, half, fmt="claude_code").trace_ids[0]
    first = evaluation(labeler, trace_id, 1)
    first_chunks = {step.chunk_id for step in first.steps}
    assert counting.labeled == len(first_chunks)

    import_payload(ingest, "\n".join(lines), fmt="claude_code")
    second = evaluation(labeler, trace_id, 2)

    second_chunks = {step.chunk_id for step in second.steps}
    relabeled = set(counting.calls[-1])
    assert len(second_chunks) > len(first_chunks)
    # Only new chunks, and the last chunk of the first half when its result arrived later, are sent again.
    assert second_chunks - first_chunks <= relabeled
    assert len(relabeled - (second_chunks - first_chunks)) <= 1
    kept = [step for step in second.steps if step.chunk_id in first_chunks - relabeled]
    assert kept and all(step.label_source == labeler_pb2.LABEL_SOURCE_LLM for step in kept)


def test_an_unchanged_reimport_sends_nothing_to_the_labeler(wired: Callable[..., tuple[Any, RunningLabeler]]) -> None:
    counting = CountingLabeler()
    ingest, labeler = wired(counting)
    trace_id = import_payload(ingest, stash_line("same")).trace_ids[0]
    evaluation(labeler, trace_id, 1)

    import_payload(ingest, stash_line("same"))
    labeler.worker.sweep()
    labeler.worker.drain()

    assert len(counting.calls) == 1


def test_a_trace_imported_with_labels_is_used_as_it_is(wired: Callable[..., tuple[Any, RunningLabeler]]) -> None:
    counting = CountingLabeler()
    ingest, labeler = wired(counting)
    trace = orjson.loads(stash_line("labelled"))
    user_label = {"task_id": "t0", "actor": "user", "intent": "request", "verdict": "none", "sentiment": "neutral"}
    answer_label = {
        "task_id": "t0",
        "actor": "agent",
        "type": "answer",
        "effect": "none",
        "result": "none",
        "is_output": True,
        "outcome": "done",
        "stance": "confident",
        "coverage": "complete",
        "note": "labelled offline",
    }
    trace["steps"][1]["metadata"] = {"label": {"chunk_id": "c0", **user_label}}
    trace["steps"][4]["metadata"] = {"label": {"chunk_id": "c2", **answer_label}}
    trace_id = import_payload(ingest, orjson.dumps(trace).decode()).trace_ids[0]

    found = evaluation(labeler, trace_id)

    assert counting.calls == []
    assert found.labeler == "imported"
    assert found.steps[3].label.note == "labelled offline"
    assert found.steps[3].label_source == labeler_pb2.LABEL_SOURCE_IMPORTED
    assert not found.steps[1].HasField("label")  # the unlabelled tool call stays unlabelled
    assert found.trace_score == pytest.approx(0.2)


def test_an_invalid_imported_label_fails_the_evaluation_naming_the_step(
    wired: Callable[..., tuple[Any, RunningLabeler]],
) -> None:
    ingest, labeler = wired()
    trace = orjson.loads(stash_line("bad-label"))
    trace["steps"][1]["metadata"] = {"label": {"task_id": "t0", "actor": "user", "intent": "shouting"}}
    trace_id = import_payload(ingest, orjson.dumps(trace).decode()).trace_ids[0]

    found = evaluation(labeler, trace_id)

    assert found.status == common_pb2.JOB_STATUS_FAILED
    assert "step 1" in found.error and "intent" in found.error


def test_the_sweep_finds_revisions_whose_announcement_was_lost(
    wired: Callable[..., tuple[Any, RunningLabeler]],
) -> None:
    ingest, labeler = wired(announce=False, start_worker=False)
    trace_ids = [import_payload(ingest, stash_line(f"lost-{n}")).trace_ids[0] for n in range(3)]

    assert labeler.worker.sweep() == 3
    assert labeler.worker.sweep() == 0  # the cursor moved on
    assert labeler.worker.drain() == 3
    assert all(evaluation(labeler, trace_id).status == common_pb2.JOB_STATUS_SUCCEEDED for trace_id in trace_ids)


def test_only_one_of_two_claimers_wins(wired: Callable[..., tuple[Any, RunningLabeler]]) -> None:
    _ingest, labeler = wired(announce=False, start_worker=False)
    labeler.stub.AnnounceTraceRevision(
        labeler_pb2.AnnounceTraceRevisionRequest(owner_id=OWNER, trace_id="t-1", revision=1), timeout=10
    )
    with transaction(labeler.sessions) as session:
        (evaluation_id,) = store.queued_ids(session, 10)

    with transaction(labeler.sessions) as first, transaction(labeler.sessions) as second:
        results = [store.claim(first, [evaluation_id])]
        first.commit()
        results.append(store.claim(second, [evaluation_id]))

    assert [[item.evaluation_id for item in won] for won in results] == [[evaluation_id], []]


def test_announced_revisions_are_queued_once_each_and_another_owners_trace_is_skipped(
    wired: Callable[..., tuple[Any, RunningLabeler]],
) -> None:
    _ingest, labeler = wired(announce=False, start_worker=False)
    with transaction(labeler.sessions) as session:
        store.enqueue(session, OTHER_OWNER, "theirs", 1)

    def announce(*revisions: tuple[str, int]) -> int:
        request = labeler_pb2.AnnounceTraceRevisionsRequest(
            owner_id=OWNER,
            revisions=[labeler_pb2.AnnouncedRevision(trace_id=trace_id, revision=rev) for trace_id, rev in revisions],
        )
        return labeler.stub.AnnounceTraceRevisions(request, timeout=10).queued

    assert announce(("t-1", 1), ("t-2", 1), ("t-2", 1), ("theirs", 2)) == 2
    assert announce(("t-1", 1), ("t-1", 2)) == 1
    with transaction(labeler.sessions) as session:
        queued = session.execute(select(store.EvaluationRow.owner_id, store.EvaluationRow.trace_id)).all()
        assert sorted(queued) == sorted([(OTHER_OWNER, "theirs"), (OWNER, "t-1"), (OWNER, "t-1"), (OWNER, "t-2")])
    with pytest.raises(grpc.RpcError) as refused:
        announce(("t-3", 0))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_an_abandoned_evaluation_is_queued_again_then_failed_after_three_attempts(
    wired: Callable[..., tuple[Any, RunningLabeler]],
) -> None:
    _ingest, labeler = wired(announce=False, start_worker=False)
    with transaction(labeler.sessions) as session:
        store.enqueue(session, OWNER, "t-2", 1)
    for _attempt in range(3):
        with transaction(labeler.sessions) as session:
            (evaluation_id,) = store.queued_ids(session, 10)
            assert store.claim(session, [evaluation_id])
        with transaction(labeler.sessions) as session:
            assert store.requeue_stale(session, timedelta(0), max_attempts=3) == 1

    with transaction(labeler.sessions) as session:
        row = session.get(store.EvaluationRow, evaluation_id)
        assert (row.status, row.attempts) == ("failed", 3)
        assert "interrupted 3 times" in row.error


def test_an_outage_of_ingest_queues_the_evaluation_again(postgres_url: str) -> None:
    unreachable = ingest_stub_nobody_answers()
    labeler = serve_labeler(postgres_url, unreachable, RuleLabeler(), start_worker=False)
    try:
        labeler.stub.AnnounceTraceRevision(
            labeler_pb2.AnnounceTraceRevisionRequest(owner_id=OWNER, trace_id="t-3", revision=1), timeout=10
        )
        with pytest.raises(Unavailable):
            labeler.worker.drain()
        with transaction(labeler.sessions) as session:
            assert store.queued_ids(session, 10)  # still queued, not failed
    finally:
        labeler.stop()


def ingest_stub_nobody_answers() -> Any:
    from stash.rm.v1 import ingest_pb2_grpc

    return ingest_pb2_grpc.IngestServiceStub(open_channel(f"127.0.0.1:{free_port()}"))


def test_a_superseded_revision_fails_and_the_current_one_is_evaluated(
    wired: Callable[..., tuple[Any, RunningLabeler]],
) -> None:
    ingest, labeler = wired(announce=False, start_worker=False)
    trace_id = import_payload(ingest, stash_line("moving")).trace_ids[0]
    changed = orjson.loads(stash_line("moving"))
    changed["steps"][1]["content"] = "I want a refund for order 1183"
    import_payload(ingest, orjson.dumps(changed).decode())
    with transaction(labeler.sessions) as session:
        store.enqueue(session, OWNER, trace_id, 1)
        store.enqueue(session, OWNER, trace_id, 2)

    labeler.worker.drain()

    assert "superseded" in evaluation(labeler, trace_id, 1).error
    assert evaluation(labeler, trace_id, 2).status == common_pb2.JOB_STATUS_SUCCEEDED


def test_relabel_sends_every_chunk_again_and_a_deleted_trace_is_forgotten(
    wired: Callable[..., tuple[Any, RunningLabeler]],
) -> None:
    counting = CountingLabeler()
    ingest, labeler = wired(counting)
    trace_id = import_payload(ingest, stash_line("again")).trace_ids[0]
    evaluation(labeler, trace_id)

    relabel = labeler.stub.RelabelTrace(labeler_pb2.RelabelTraceRequest(owner_id=OWNER, trace_id=trace_id), timeout=10)
    assert (relabel.revision, relabel.status) == (1, common_pb2.JOB_STATUS_QUEUED)
    deadline = time.monotonic() + 15
    while len(counting.calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert counting.calls[0] == counting.calls[1] == ["c0", "c1", "c2"]

    ingest.DeleteTrace(ingest_pb2.DeleteTraceRequest(owner_id=OWNER, trace_id=trace_id), timeout=10)
    with transaction(labeler.sessions) as session:
        store.enqueue(session, OWNER, trace_id, 2)
    labeler.worker.drain()
    # The labeler's own worker may have claimed the revision before this drain: wait for whichever took it.
    wait_until(lambda: _forgotten(labeler, trace_id), timeout_s=15, what="the deleted trace forgotten")


def _forgotten(labeler: RunningLabeler, trace_id: str) -> bool:
    with transaction(labeler.sessions) as session:
        no_evaluation = store.latest_evaluation(session, OWNER, trace_id, None) is None
        return no_evaluation and store.kept_labels(session, trace_id) == {}


def test_relabel_of_another_owners_trace_is_not_found(wired: Callable[..., tuple[Any, RunningLabeler]]) -> None:
    ingest, labeler = wired()
    trace_id = import_payload(ingest, stash_line("mine")).trace_ids[0]

    with pytest.raises(grpc.RpcError) as raised:
        labeler.stub.RelabelTrace(labeler_pb2.RelabelTraceRequest(owner_id="intruder", trace_id=trace_id), timeout=10)

    assert raised.value.code() == grpc.StatusCode.NOT_FOUND


def test_summaries_list_the_latest_succeeded_score_in_request_order(
    wired: Callable[..., tuple[Any, RunningLabeler]],
) -> None:
    ingest, labeler = wired()
    first, second = (import_payload(ingest, stash_line(name)).trace_ids[0] for name in ("s1", "s2"))
    evaluation(labeler, first)
    evaluation(labeler, second)

    response = labeler.stub.BatchGetEvaluationSummaries(
        labeler_pb2.BatchGetEvaluationSummariesRequest(owner_id=OWNER, trace_ids=[second, "unknown", first]),
        timeout=10,
    )

    assert [item.trace_id for item in response.summaries] == [second, first]
    assert all(item.trace_score == pytest.approx(0.17) for item in response.summaries)


def test_the_sweep_lists_nothing_inside_the_settle_window_and_a_backfill_everything(postgres_url: str) -> None:
    ingest, stop = serve_ingest(postgres_url, derive_title, settle=timedelta(minutes=5))
    try:
        imported = import_payload(ingest, stash_line("fresh"))
        page = ingest.ListTraceRevisions(ingest_pb2.ListTraceRevisionsRequest(), timeout=10)
        assert list(page.revisions) == [] and page.next_cursor == ""

        everything = ingest.ListTraceRevisions(ingest_pb2.ListTraceRevisionsRequest(include_unsettled=True), timeout=10)
        assert [(item.trace_id, item.revision) for item in everything.revisions] == [(imported.trace_ids[0], 1)]
    finally:
        stop()


def test_a_foreign_cursor_is_refused(wired: Callable[..., tuple[Any, RunningLabeler]]) -> None:
    ingest, _labeler = wired(start_worker=False)

    with pytest.raises(grpc.RpcError) as raised:
        ingest.ListTraceRevisions(ingest_pb2.ListTraceRevisionsRequest(cursor="not-a-cursor"), timeout=10)

    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def _label_reply(_path: str, body: dict[str, Any]) -> str:
    """A valid label for the chunk the last message asks about (the local stand-in's model)."""
    asked = str(body["messages"][-1]["content"])
    chunk_id, actor = re.search(r"Label chunk (c\d+) \(actor (\w+)", asked).groups()  # type: ignore[union-attr]
    if actor == "user":
        fields = {"intent": "request", "verdict": "none", "sentiment": "neutral"}
    else:
        fields = {"type": "message", "effect": "none", "result": "none", "is_output": False}
        fields |= {"outcome": "none", "stance": "none", "coverage": "none"}
    return orjson.dumps({"chunk_id": chunk_id, "task_id": "t0", "actor": actor, **fields}).decode()


def test_the_llm_labeler_sends_only_new_chunks_and_records_schema_failures(
    wired: Callable[..., tuple[Any, RunningLabeler]], fake_llm: FakeLLM
) -> None:
    client = openai.OpenAI(api_key="test", base_url=f"{fake_llm.url}/v1", max_retries=0)
    ingest, labeler = wired(OpenAILabeler(client, "label-model"))
    lines = _claude_code_lines()
    fake_llm.reply = lambda _path, _body: '{"chunk_id": "c0", "actor": "user", "intent": "shouting"}'
    trace_id = import_payload(ingest, "\n".join(lines[: len(lines) // 2]), fmt="claude_code").trace_ids[0]

    failed = evaluation(labeler, trace_id, 1)
    assert failed.status == common_pb2.JOB_STATUS_FAILED
    assert "chunk c0" in failed.error and len(fake_llm.requests) == 2  # one retry, then the recorded failure

    fake_llm.reply = _label_reply
    fake_llm.requests.clear()
    labeler.stub.RelabelTrace(labeler_pb2.RelabelTraceRequest(owner_id=OWNER, trace_id=trace_id), timeout=10)
    first = evaluation(labeler, trace_id, 1, accept_failed=False)
    first_chunks = {step.chunk_id for step in first.steps}
    assert len(fake_llm.requests) == len(first_chunks)
    assert {step.label_model for step in first.steps} == {"label-model"}

    fake_llm.requests.clear()
    import_payload(ingest, "\n".join(lines), fmt="claude_code")
    second = evaluation(labeler, trace_id, 2)
    new_chunks = {step.chunk_id for step in second.steps} - first_chunks
    assert new_chunks and len(new_chunks) <= len(fake_llm.requests) <= len(new_chunks) + 1


def test_process_patterns_of_several_traces_come_in_one_call_of_the_owners_findings(
    wired: Callable[..., tuple[Any, RunningLabeler]],
) -> None:
    ingest, labeler = wired()
    looping = import_payload(ingest, looping_test_session(), fmt="claude_code").trace_ids[0]
    plain = import_payload(ingest, stash_line("plain-patterns")).trace_ids[0]
    evaluation(labeler, looping)
    evaluation(labeler, plain)
    page = common_pb2.PageRequest(limit=500)

    def findings(owner_id: str = OWNER, **filters: Any) -> list[tuple[str, str]]:
        request = labeler_pb2.ListProcessPatternsRequest(owner_id=owner_id, page=page, **filters)
        return sorted((item.trace_id, item.pattern.name) for item in labeler.stub.ListProcessPatterns(request).findings)

    one_by_one = findings(trace_id=looping) + findings(trace_id=plain)

    assert {name for _, name in one_by_one} == {"stuck_on_test", "ping_pong", "repetition_loop"}
    assert findings(trace_ids=[looping, plain]) == sorted(one_by_one)
    assert findings(trace_ids=[plain]) == []
    assert findings(trace_ids=[looping, plain], pattern="ping_pong") == [(looping, "ping_pong")]
    assert findings(trace_ids=[looping], trace_id=plain) == []  # both filters hold
    assert findings("someone-else", trace_ids=[looping, plain]) == []
    with pytest.raises(grpc.RpcError) as refused:
        findings(trace_ids=[looping] * 501)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("labeler_database", ["postgresql", "sqlite"])
def test_one_batch_saves_each_evaluation_and_settles_each_failure_apart(
    postgres_url: str, tmp_path: Path, labeler_database: str
) -> None:
    ingest, stop_ingest = serve_ingest(postgres_url, derive_title, None)
    url = postgres_url if labeler_database == "postgresql" else f"sqlite:///{tmp_path / 'labeler.db'}"
    labeler = serve_labeler(url, ingest, RuleLabeler(), start_worker=False)
    try:
        _one_batch(ingest, labeler)
    finally:
        labeler.stop()
        stop_ingest()


def _one_batch(ingest: Any, labeler: RunningLabeler) -> None:
    labeled = [import_payload(ingest, stash_line(f"batch-{n}")).trace_ids[0] for n in range(3)]
    deleted = import_payload(ingest, stash_line("batch-deleted")).trace_ids[0]
    invalid = orjson.loads(stash_line("batch-invalid"))
    invalid["steps"][1]["metadata"] = {"label": {"task_id": "t0", "actor": "user", "intent": "shouting"}}
    invalid_id = import_payload(ingest, orjson.dumps(invalid).decode()).trace_ids[0]
    assert labeler.worker.sweep() == 5
    ingest.DeleteTrace(ingest_pb2.DeleteTraceRequest(owner_id=OWNER, trace_id=deleted), timeout=10)

    assert labeler.worker.drain() == 5  # one batch

    for trace_id in labeled:
        found = evaluation(labeler, trace_id)
        assert found.status == common_pb2.JOB_STATUS_SUCCEEDED
        assert [step.label.actor for step in found.steps] == ["user", "agent", "agent", "agent"]
    assert "step 1" in evaluation(labeler, invalid_id).error
    with transaction(labeler.sessions) as session:
        assert store.latest_evaluation(session, OWNER, deleted, None) is None
        assert set(store.kept_labels(session, labeled[0])) == {"c0", "c1", "c2"}
    # Announced again, an evaluated revision is not queued again.
    labeler.stub.AnnounceTraceRevision(
        labeler_pb2.AnnounceTraceRevisionRequest(owner_id=OWNER, trace_id=labeled[0], revision=1), timeout=10
    )
    assert labeler.worker.drain() == 0
