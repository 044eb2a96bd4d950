"""Generated titles through the real anthropic client against the local provider stand-in."""

from typing import Any

import grpc
import pytest
from fakes.llm_server import FakeLLM

from stash.rm.v1 import ingest_pb2
from stash_ingest.titles import ModelTitles
from support.ingest import OWNER, import_payload, serve_ingest, stash_line, trace_total


@pytest.fixture
def titled_ingest(postgres_url: str, fake_llm: FakeLLM) -> Any:
    stub, stop = serve_ingest(postgres_url, ModelTitles("test-key", "claude-haiku-4-5", fake_llm.url))
    yield stub
    stop()


def test_missing_title_is_generated_by_the_fast_model(titled_ingest: Any, fake_llm: FakeLLM) -> None:
    fake_llm.reply = lambda _path, _body: '"Refund for a delivered order"'

    trace_id = import_payload(titled_ingest, stash_line()).trace_ids[0]

    detail = titled_ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=OWNER, trace_id=trace_id), timeout=30)
    assert detail.summary.title == "Refund for a delivered order"
    path, body = fake_llm.requests[0]
    assert path == "/v1/messages" and body["model"] == "claude-haiku-4-5"
    assert "I want a refund for order 1182" in body["messages"][0]["content"]


def test_failed_title_generation_fails_the_import_and_stores_nothing(titled_ingest: Any, fake_llm: FakeLLM) -> None:
    fake_llm.fail_status = 400

    with pytest.raises(grpc.RpcError) as caught:
        import_payload(titled_ingest, stash_line("t"))

    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "title generation" in caught.value.details()
    assert trace_total(titled_ingest) == 0


def test_recorded_titles_never_call_the_model(titled_ingest: Any, fake_llm: FakeLLM) -> None:
    import_payload(titled_ingest, stash_line(title="Given"))

    assert fake_llm.requests == []
