"""The LangSmith adapter on the real run-ops export and SDK batches, and synthetic runs for the gaps."""

from collections import Counter
from typing import Any

import pytest

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.langsmith import looks_like_langsmith, parse_langsmith
from stash_ingest.traces import Trace
from support.fixtures import real_fixture
from support.traces import assert_fixture_parses, jsonl, only_trace, roles

FIXTURES = (
    "langsmith/langgraph-cloud-run-ops-subset.jsonl",
    "langsmith/py-sdk-wrap-openai-stream.post-patch.json",
    "langsmith/js-sdk-wrap-openai-reasoning.post-patch.json",
)
GRAPH_TRACE = "1efb27a4-5264-6908-9ab5-23fc3c60ae2d"


def _only(raw: bytes) -> Trace:
    return only_trace(parse_langsmith(raw))


def _lc(kind: str, **kwargs: Any) -> dict[str, Any]:
    """A LangChain message as `dumpd` serializes it."""
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", kind], "kwargs": kwargs}


def _at(second: int | None) -> str | None:
    return None if second is None else f"2025-01-02T03:00:{second:02d}Z"


def _run(run_id: str, run_type: str, start: int, end: int | None, **fields: Any) -> dict[str, Any]:
    return {
        "id": run_id,
        "trace_id": "t",
        "run_type": run_type,
        "start_time": _at(start),
        "end_time": _at(end),
        **fields,
    }


def _llm(
    run_id: str, start: int, end: int, messages: list[Any], answer: dict[str, Any], **fields: Any
) -> dict[str, Any]:
    generation = {"text": "", "type": "ChatGeneration", "message": answer}
    return _run(
        run_id,
        "llm",
        start,
        end,
        name="ChatAnthropic",
        inputs={"messages": [messages]},
        outputs={"generations": [[generation]]},
    )


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_parses_and_validates_when_real(name: str) -> None:
    assert_fixture_parses(parse_langsmith, looks_like_langsmith, name)


def test_langgraph_runs_merge_two_llm_calls_when_run_ops_export() -> None:
    trace = _only(real_fixture("langsmith/langgraph-cloud-run-ops-subset.jsonl"))

    assert trace.external_id == GRAPH_TRACE
    assert trace.title is None
    assert roles(trace) == [
        *("system", "user", "assistant", "user", "assistant", "user", "assistant"),
        *("system", "user", "assistant"),
    ]
    assert trace.steps[0].content.startswith("You are a LangChain expert and a world-class researcher")
    assert trace.steps[1].content.startswith("lets refactor this workflow wrapper so that tool execution")
    plan, response = trace.steps[6], trace.steps[9]
    assert (plan.tool_name, plan.tool_call_id, plan.content) == ("Plan", "call_M9wrxDkTi5Z7vjbfyv45Jlok", "")
    assert len(plan.tool_input["steps"]) == 3
    assert (response.tool_name, response.tool_call_id) == ("Response", "call_15FCR8QBIapaJC4wST7nJPDE")
    assert response.tool_input["queries"][0] == "function signature of process_claims_query"
    assert trace.steps[8].content.startswith("Review the function signature of the tool 'process_claims_query'")
    assert trace.steps[0].metadata["timestamp"] == "2024-12-04T19:59:29.690211+00:00"  # naive UTC in the file
    assert trace.steps[6].metadata["timestamp"] == "2024-12-04T19:59:31.051257+00:00"


def test_langgraph_runs_build_the_tree_from_dotted_order_when_no_parent_run_id() -> None:
    trace = _only(real_fixture("langsmith/langgraph-cloud-run-ops-subset.jsonl"))

    spans = {span.id: span for span in trace.spans}
    assert len(trace.spans) == 19  # 38 lines: a post and a patch per run
    assert Counter(span.kind for span in trace.spans) == {"chain": 14, "llm": 2, "parser": 2, "retriever": 1}
    assert spans[GRAPH_TRACE].parent_id is None
    assert spans["53569791-32cd-4c07-985b-e775c1de8f05"].parent_id == "6f02dfd0-2e62-4e11-b6a1-b11b0005fbf5"
    assert spans["83d527a0-6e10-44f2-b583-e87ddebaa65a"].parent_id == "e8d09223-0c52-4e3f-ad0e-e7698d57a18b"
    assert spans["53569791-32cd-4c07-985b-e775c1de8f05"].step_indices == (0, 1, 2, 3, 4, 5, 6)
    assert spans["4cd3d44d-c525-4a2d-8a2c-57b56ac3f5c8"].step_indices == (7, 8, 9)
    assert spans[GRAPH_TRACE].start_ns == 1_733_342_369_374_537_000
    assert spans[GRAPH_TRACE].end_ns == 1_733_342_416_559_179_000
    assert trace.metadata["run_name"] == "RetrievalGraph"
    assert trace.metadata["model"] == "gpt-4o-mini"
    assert trace.metadata["thread_id"] == "a42dc55d-90cc-4671-93ec-63f025217bc2"


def test_python_wrap_openai_batch_merges_post_and_patch_when_streamed() -> None:
    trace = _only(real_fixture("langsmith/py-sdk-wrap-openai-stream.post-patch.json"))

    assert trace.external_id == "fe8ffecb-72ce-4cd2-bdb7-01f34654c391"
    assert [(step.role, step.content) for step in trace.steps] == [
        ("user", "howdy"),
        ("assistant", "Howdy! How can I assist you today?"),
    ]
    assert trace.steps[0].metadata["timestamp"] == "2024-10-11T20:58:20.695375+00:00"
    assert trace.steps[1].metadata["timestamp"] == "2024-10-11T20:58:22.023816+00:00"
    (span,) = trace.spans
    assert (span.kind, span.name, span.parent_id, span.step_indices) == ("llm", "ChatOpenAI", None, (0, 1))
    assert span.end_ns - span.start_ns == 1_328_441_000
    assert trace.metadata["session_name"] == "default"
    assert trace.metadata["model"] == "gpt-4o-mini"
    assert trace.metadata["usage"] == {"input_tokens": 9, "output_tokens": 9, "total_tokens": 18, "reasoning_tokens": 0}


def test_js_wrap_openai_batch_reads_epoch_milliseconds_and_id_from_dotted_order() -> None:
    trace = _only(real_fixture("langsmith/js-sdk-wrap-openai-reasoning.post-patch.json"))

    assert trace.external_id == "e954b8e3-c337-4a05-bf0a-ca2baac3ba48"
    assert roles(trace) == ["user", "assistant"]
    assert trace.steps[0].content.startswith("Write a bash script that takes a matrix represented as a string")
    assert trace.steps[1].content.startswith("Certainly! Below is a Bash script")
    assert trace.steps[0].metadata["timestamp"] == "2024-10-13T07:05:38.291000+00:00"
    assert trace.steps[1].metadata["timestamp"] == "2024-10-13T07:05:48.730000+00:00"
    (span,) = trace.spans  # the patch has no `id`: it is matched through dotted_order
    assert (span.start_ns, span.end_ns) == (1_728_803_138_291_000_000, 1_728_803_148_730_000_000)
    assert trace.metadata["model"] == "o1-mini"
    assert trace.metadata["usage"]["reasoning_tokens"] == 960


def test_tool_run_answered_by_next_llm_input_is_a_span_only_when_synthetic() -> None:
    call = {"name": "search", "args": {"q": "tides"}, "id": "call_1", "type": "tool_call"}
    asked = [
        _lc("SystemMessage", content="Be brief.", type="system"),
        _lc("HumanMessage", content="tides?", type="human"),
    ]
    answer = _lc("AIMessage", content="", type="ai", tool_calls=[call])
    result = _lc("ToolMessage", content="High at 6pm", type="tool", tool_call_id="call_1", name="search")
    runs = jsonl(
        _run("t", "chain", 0, 9, name="agent"),
        _llm("l1", 1, 2, asked, answer, parent_run_id="t"),
        _run(
            "r1",
            "tool",
            3,
            4,
            name="search",
            parent_run_id="t",
            inputs={"input": "{'q': 'tides'}"},
            outputs={"output": result},
        ),
        _llm(
            "l2",
            5,
            6,
            [*asked, answer, result],
            _lc("AIMessage", content="High tide is at 6pm.", type="ai"),
            parent_run_id="t",
        ),
    )

    trace = _only(runs)

    assert roles(trace) == ["system", "user", "assistant", "tool", "assistant"]
    assert (trace.steps[3].tool_name, trace.steps[3].tool_call_id, trace.steps[3].content) == (
        "search",
        "call_1",
        "High at 6pm",
    )
    spans = {span.id: span for span in trace.spans}
    assert (spans["r1"].kind, spans["r1"].parent_id, spans["r1"].step_indices) == ("tool", "t", ())
    assert spans["l2"].step_indices == (3, 4)


def test_tool_run_supplies_a_result_no_llm_input_carries_when_synthetic() -> None:
    answer = _lc(
        "AIMessage", content="Deleting.", type="ai", tool_calls=[{"name": "rm", "args": {"path": "/x"}, "id": "call_9"}]
    )
    runs = jsonl(
        _llm(
            "l1",
            1,
            2,
            [_lc("HumanMessage", content="clean up", type="human")],
            answer,
        ),
        _run(
            "r1",
            "tool",
            3,
            4,
            name="rm",
            inputs={"input": "{'path': '/x'}"},
            error="PermissionError: /x",
        ),
    )

    trace = _only(runs)

    assert roles(trace) == ["user", "assistant", "assistant", "tool"]
    result = trace.steps[3]
    assert (result.tool_call_id, result.tool_name, result.content) == ("call_9", "rm", "PermissionError: /x")
    assert result.metadata == {"is_error": True, "timestamp": "2025-01-02T03:00:04.000000+00:00"}
    assert next(span for span in trace.spans if span.id == "r1").output == {"error": "PermissionError: /x"}


def test_anthropic_content_blocks_map_thinking_images_and_dedupe_calls_when_synthetic() -> None:
    blocks = [
        {"type": "thinking", "thinking": "Look first.", "signature": "sig"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "view", "input": {"path": "a.png"}},
    ]
    answer = _lc(
        "AIMessage",
        content=blocks,
        type="ai",
        tool_calls=[{"name": "view", "args": {"path": "a.png"}, "id": "toolu_1"}],
    )
    human = _lc(
        "HumanMessage",
        type="human",
        content=[
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    )

    trace = _only(jsonl(_llm("l1", 1, 2, [human], answer)))

    assert roles(trace) == ["user", "assistant", "assistant"]
    assert trace.steps[0].content == "What is this?\n[image]"
    assert (trace.steps[1].content, trace.steps[1].metadata["reasoning"]) == ("Let me look.", "Look first.")
    assert trace.steps[2].tool_call_id == "toolu_1"


def test_runs_of_two_traces_give_two_traces_in_first_seen_order_when_synthetic() -> None:
    def single(trace_id: str, text: str) -> dict[str, Any]:
        messages = {"messages": [{"role": "user", "content": text}]}
        outputs = {"choices": [{"message": {"role": "assistant", "content": text.upper()}}]}
        return _run(trace_id, "llm", 0, 1, inputs=messages, outputs=outputs) | {"trace_id": trace_id}

    traces = parse_langsmith(jsonl(single("b", "second"), single("a", "first")))

    assert [trace.external_id for trace in traces] == ["b", "a"]
    assert [step.content for step in traces[1].steps] == ["first", "FIRST"]


def test_patch_on_a_later_line_wins_over_post_fields_when_synthetic() -> None:
    post = _run("l1", "llm", 0, None, inputs={"messages": [{"role": "user", "content": "hi"}]}, outputs={})
    patch = {
        "id": "l1",
        "end_time": _at(5),
        "outputs": {"choices": [{"message": {"role": "assistant", "content": "yo"}}]},
    }

    trace = _only(jsonl({"post": [post]}, {"patch": [patch]}))

    assert [step.content for step in trace.steps] == ["hi", "yo"]
    assert trace.spans[0].end_ns - trace.spans[0].start_ns == 5_000_000_000


def test_jsonl_keeps_line_separators_inside_strings_when_synthetic() -> None:
    text = "one\u2028two\u2029three"
    run = _run(
        "l1",
        "llm",
        0,
        1,
        inputs={"messages": [{"role": "user", "content": text}]},
        outputs={"output": "ok"},
    )

    trace = _only(jsonl(run, _run("c1", "chain", 0, 2, name="root")))

    assert trace.steps[0].content == text
    assert len(trace.spans) == 2


def test_line_that_is_not_a_run_fails_naming_it() -> None:
    with pytest.raises(InvalidArgument, match=r"line 2: id: expected LangSmith runs"):
        parse_langsmith(jsonl(_run("c1", "chain", 0, None), {"messages": []}))


def test_trace_without_llm_runs_fails_naming_its_first_line() -> None:
    root = _run("c1", "chain", 0, None, inputs={"question": "hi"})
    child = _run("c2", "retriever", 1, None, parent_run_id="c1")

    with pytest.raises(InvalidArgument, match=r"line 1: run_type: trace t has no `llm` run"):
        parse_langsmith(jsonl(root, child))


def test_bad_json_and_empty_payload_fail_naming_where() -> None:
    with pytest.raises(InvalidArgument, match=r"line 2: is not valid JSON"):
        parse_langsmith(b'{"id": "a", "run_type": "llm"}\n{"id": \n')
    with pytest.raises(InvalidArgument, match=r"payload: is empty"):
        parse_langsmith(b"\n\n")


@pytest.mark.parametrize(
    "value",
    [
        {"steps": [{"role": "user", "content": "hi"}]},
        {"messages": [{"role": "user", "content": "hi"}]},
        {"resourceSpans": []},
        {"trace": {"observations": []}, "observations": []},
        {"sessionId": "s", "type": "assistant", "message": {}},
        {"type": "response_item", "payload": {}},
        [{"run_type": "llm"}],
        None,
    ],
)
def test_looks_like_langsmith_is_false_for_other_shapes(value: Any) -> None:
    assert not looks_like_langsmith(value)


def test_looks_like_langsmith_is_true_for_run_and_batch_shapes() -> None:
    assert looks_like_langsmith({"id": "r", "run_type": "llm"})
    assert looks_like_langsmith({"id": "r", "dotted_order": "20240101T000000000000Zr"})
    assert looks_like_langsmith({"post": [], "patch": []})
