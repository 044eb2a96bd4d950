"""LangSmith runs: run export JSONL and `{"post": [...], "patch": [...]}` batch files, one trace per trace_id.

Runs may arrive as a create and later updates with the same id (a patch may lack the trace id,
the run type, even the id, which then comes from `dotted_order`); they are merged first, later
non-null fields winning. `dotted_order` (`<time>Z<run id>` segments joined by ".") is the real
tree: exports often have no `parent_run_id`.

Steps come from `llm` runs in start order, prefix-merged: each call adds the input messages beyond
the longest history already seen (an earlier call's input plus output), then its output. Inputs
are LangChain serialized messages (`{"lc": 1, "type": "constructor", ...}`, one list per prompt),
LangChain message dicts, or the raw provider request of `wrap_openai`/`wrap_anthropic`; outputs
are `generations` or the raw provider response. A `tool` run only adds a result that no later LLM
input carries. Every run with a start time becomes a span.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.messages import (
    ROLES,
    BlockReader,
    Call,
    Parts,
    attach_reasoning,
    call_steps,
    collect_texts,
    find_call,
    image_text,
    merge_calls,
    message_steps,
    read_parts,
    result_step,
    result_text,
    stamp_steps,
)
from stash_ingest.adapters.prompts import Prompts
from stash_ingest.adapters.reading import (
    Counted,
    decode_nested,
    epoch_ns,
    list_or_empty,
    nonblank,
    object_or_empty,
    read_records,
)
from stash_ingest.limits import (
    DEFAULT_LIMITS,
    TraceLimits,
    TraceReader,
    check_spans_read,
    check_traces_read,
)
from stash_ingest.traces import Span, Step, Trace

_URL_KEY = "url"  # where LangChain's standard content blocks put an image's address
_EXPECTED = (
    'expected LangSmith runs (id, trace_id, run_type, inputs, outputs) or a {"post": [...], "patch": [...]} batch'
)

Run = dict[str, Any]
# Every message of an llm run's prompt ends up in its trace: counted by streaming in a large run (a line, or the
# items of an array). LangChain logs one message list per batched prompt, and the first is read (`_prompt_messages`).
PROMPTS = Prompts(
    is_call=lambda run: run.get("run_type") == "llm",
    lists={"inputs.messages": None},
    steps=lambda message: len(_item_steps(decode_nested(message), "user")[0]),
    nested="first",
)
COUNTED: Counted = {"": PROMPTS, "item": PROMPTS}


def parse_langsmith(raw: bytes, limits: TraceLimits = DEFAULT_LIMITS) -> list[Trace]:
    """Parse LangSmith runs (JSONL, a JSON array, or post/patch batches) into one validated trace per trace_id."""
    records = read_records(raw, COUNTED, limits)
    if not records:
        raise InvalidArgument("payload", f"is empty; {_EXPECTED}")
    runs, wheres = _merge_runs((run for where, value in records for run in _expand(value, where)), limits)
    traces: dict[str, list[Run]] = {}
    for run in runs:
        traces.setdefault(_trace_id(run), []).append(run)
    reader = TraceReader(limits)
    for trace_id, members in traces.items():
        where = wheres[members[0]["id"]]
        reader.add(_read_trace(trace_id, members, where, limits), f"{where} (trace {trace_id})")
    return reader.traces


def looks_like_langsmith(value: Any) -> bool:
    """True for a run (`run_type` or `dotted_order`) or a `{post, patch}` batch."""
    if not isinstance(value, dict):
        return False
    batch = isinstance(value.get("post"), list) or isinstance(value.get("patch"), list)
    return "run_type" in value or isinstance(value.get("dotted_order"), str) or batch


def _expand(value: Any, where: str) -> list[tuple[str, str, Run]]:
    """(where, run id, run) of each run of one record: a batch's posts then patches, a run and its `child_runs`."""
    if isinstance(value, dict) and "run_type" not in value and ("post" in value or "patch" in value):
        return [
            entry
            for key in ("post", "patch")
            for index, run in enumerate(list_or_empty(value.get(key)))
            for entry in _expand(run, f"{where}: {key}[{index}]")
        ]
    run_id = _run_id(value) if isinstance(value, dict) else None
    if run_id is None:
        raise InvalidArgument(f"{where}: id", _EXPECTED)
    children = list_or_empty(value.get("child_runs"))
    nested = [
        entry for index, child in enumerate(children) for entry in _expand(child, f"{where}: child_runs[{index}]")
    ]
    return [(where, run_id, value), *nested]


def _merge_runs(entries: Iterable[tuple[str, str, Run]], limits: TraceLimits) -> tuple[list[Run], dict[str, str]]:
    """Runs merged by id in first-seen order (later non-null fields win), and where each was first seen.

    Each new run is counted in its trace as it is read, since a run is a span: too many traces, or too many runs
    in one trace, stop the reading."""
    runs: dict[str, Run] = {}
    wheres: dict[str, str] = {}
    per_trace: dict[str, int] = {}
    for where, run_id, run in entries:
        merged = runs.setdefault(run_id, {})
        merged.update({key: value for key, value in run.items() if value is not None and key != "child_runs"})
        merged["id"] = run_id
        if run_id not in wheres:
            wheres[run_id] = where
            trace_id = _trace_id(merged)
            per_trace[trace_id] = per_trace.get(trace_id, 0) + 1
            check_traces_read(len(per_trace), limits)
            check_spans_read(per_trace[trace_id], f"{where} (trace {trace_id})", limits)
    return list(runs.values()), wheres


def _read_trace(trace_id: str, runs: list[Run], where: str, limits: TraceLimits) -> Trace:
    timeline = sorted(runs, key=_start_order)
    steps, contributed = _walk(timeline, f"{where} (trace {trace_id})", limits)
    if not steps:
        raise InvalidArgument(
            f"{where}: run_type", f"trace {trace_id} has no `llm` run with usable input or output messages"
        )
    return Trace(
        steps=tuple(steps),
        external_id=trace_id,
        metadata=_trace_metadata(trace_id, timeline),
        spans=_spans(timeline, contributed),
    )


def _start_order(run: Run) -> tuple[bool, int, str]:
    start = epoch_ns(run.get("start_time"))
    return start is None, start or 0, str(run.get("dotted_order") or "")


# --- the run tree ------------------------------------------------------------------------------


def _segments(run: Run) -> list[str]:
    """Run ids along `dotted_order`, root first (each segment is `<YYYYMMDDTHHMMSSffffff>Z<run id>`)."""
    dotted = run.get("dotted_order")
    return [segment.partition("Z")[2] for segment in dotted.split(".")] if isinstance(dotted, str) else []


def _run_id(run: Run) -> str | None:
    segments = _segments(run)
    return nonblank(run.get("id")) or (nonblank(segments[-1]) if segments else None)


def _trace_id(run: Run) -> str:
    segments = _segments(run)
    return nonblank(run.get("trace_id")) or (nonblank(segments[0]) if segments else None) or run["id"]


def _parent_id(run: Run) -> str | None:
    segments = _segments(run)
    return nonblank(run.get("parent_run_id")) or (nonblank(segments[-2]) if len(segments) > 1 else None)


# --- the conversation --------------------------------------------------------------------------


def _walk(timeline: list[Run], where: str, limits: TraceLimits) -> tuple[list[Step], dict[int, tuple[int, ...]]]:
    """The merged steps, and for each run (by position) the steps it contributed."""
    calls = {
        index: _call_steps(run, where, limits) for index, run in enumerate(timeline) if run.get("run_type") == "llm"
    }
    tools = {index: run for index, run in enumerate(timeline) if run.get("run_type") == "tool"}
    return merge_calls(calls, tools, _tool_run_result)


def _call_steps(run: Run, where: str, limits: TraceLimits) -> Call:
    """An llm run's prompt and answer as steps, stamped with the run's start and end."""
    inputs = decode_nested(run.get("inputs"))
    prompt: list[Step] = []
    if isinstance(inputs, dict):
        system = inputs.get("system", inputs.get("instructions"))
        prompt = _steps({"role": "system", "content": system}, where, limits) if system else []
        prompt += _steps(_prompt_messages(inputs), where, limits, "user")
    outputs = _steps(_answer(decode_nested(run.get("outputs"))), where, limits, "assistant")
    ended = run.get("end_time") or run.get("start_time")
    return stamp_steps(prompt, run.get("start_time")), stamp_steps(outputs, ended)


def _prompt_messages(inputs: dict[str, Any]) -> Any:
    """The messages of one prompt: LangChain logs a list of message lists, one per batched prompt."""
    messages = inputs.get("messages", inputs.get("input"))
    if isinstance(messages, list) and messages and isinstance(messages[0], list) and not _is_pair(messages[0]):
        return messages[0]
    if messages is None and isinstance(inputs.get("prompts"), list):
        return inputs["prompts"][:1]
    return messages


def _answer(outputs: Any) -> Any:
    """The answer inside an llm run's outputs: the first generation, choice or Responses output."""
    if not isinstance(outputs, dict) or "role" in outputs or outputs.get("type") == "message":
        return outputs
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0][0] if isinstance(generations[0], list) and generations[0] else generations[0]
        return first.get("message", first.get("text")) if isinstance(first, dict) else None
    choices = outputs.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return choices[0].get("message", choices[0].get("text"))
    return outputs.get("output", outputs.get("messages"))


def _tool_run_result(run: Run, steps: list[Step], answered: set[str | None]) -> Step | None:
    """A tool step from a `tool` run, when it runs a call that no LLM input answers."""
    outputs = object_or_empty(run.get("outputs"))
    output = decode_nested(outputs.get("output", outputs or None))
    message = _plain(output) if isinstance(output, dict) else None
    call_id = nonblank(message.get("tool_call_id")) if message else None
    inputs = object_or_empty(run.get("inputs"))
    call = find_call(steps, answered, call_id, nonblank(run.get("name")), decode_nested(inputs.get("input", inputs)))
    if call is None:
        return None
    content = message.get("content") if message else (output if output is not None else run.get("error"))
    is_error = bool(run.get("error")) or (message is not None and message.get("status") == "error")
    result = _result(call.tool_call_id, call.tool_name, content, is_error)
    return stamp_steps([result], run.get("end_time") or run.get("start_time"))[0]


# --- messages ----------------------------------------------------------------------------------


def _steps(value: Any, where: str, limits: TraceLimits, role: str = "user") -> list[Step]:
    """Steps from one message or a list of them; `role` is for bare strings. Unusable items are skipped."""
    items = value if isinstance(value, list) and not _is_pair(value) else [value]
    return attach_reasoning((_item_steps(decode_nested(item), role) for item in items), where, limits)


def _item_steps(item: Any, role: str) -> tuple[list[Step], list[str]]:
    """The steps of one message or Responses-API item, and reasoning text for the first step made."""
    if isinstance(item, str):
        return ([Step(role, item)] if item.strip() else []), []
    message = _plain(item) if isinstance(item, dict) or _is_pair(item) else None
    if message is None:
        return [], []
    kind = message.get("type")
    if kind == "function_call":
        return call_steps(message.get("call_id"), message.get("name"), message.get("arguments")), []
    if kind == "function_call_output":
        return [_result(message.get("call_id"), None, message.get("output"), False)], []
    if kind == "reasoning" and "role" not in message:
        return [], collect_texts(message.get("summary"))
    return _message_steps(message)


def _plain(item: Any) -> dict[str, Any] | None:
    """A message as {role, content, ...}: LangChain serialized, `messages_to_dict`, tuple and type-keyed forms."""
    if _is_pair(item):
        return {"role": item[0], "content": item[1]}
    if isinstance(item.get("kwargs"), dict) and item.get("lc") == 1:
        kwargs = item["kwargs"]
        return {**kwargs, "role": _lc_role(item.get("id"), kwargs)}
    if isinstance(item.get("data"), dict) and isinstance(item.get("type"), str):
        return {**item["data"], "role": item["data"].get("role", item["type"])}
    if "role" not in item and isinstance(item.get("type"), str) and item["type"] in ROLES and "content" in item:
        return {**item, "role": item["type"]}
    return item


def _lc_role(path: Any, kwargs: dict[str, Any]) -> Any:
    """The role of a serialized LangChain message: ChatMessage carries it, others are named by their class."""
    if isinstance(kwargs.get("role"), str):
        return kwargs["role"]
    if isinstance(kwargs.get("type"), str):
        return kwargs["type"]
    name = path[-1] if isinstance(path, list) and path and isinstance(path[-1], str) else ""
    return name.removesuffix("Chunk").removesuffix("Message").lower()


def _message_steps(message: dict[str, Any]) -> tuple[list[Step], list[str]]:
    role = ROLES.get(message["role"].lower()) if isinstance(message.get("role"), str) else None
    if role is None:
        return [], []
    if role == "tool":
        is_error = message.get("status") == "error" or message.get("is_error") is True
        return [_result(message.get("tool_call_id"), message.get("name"), message.get("content"), is_error)], []
    parts = _parts(message)
    return message_steps(role, parts), parts.reasoning


def _parts(message: dict[str, Any]) -> Parts:
    parts = read_parts(message.get("content"), _BLOCKS)
    extra = object_or_empty(message.get("additional_kwargs"))
    for entry in _tool_calls(message, extra):
        if not any(call.tool_call_id == entry.tool_call_id for call in parts.calls if call.tool_call_id):
            parts.calls.append(entry)
    parts.reasoning.extend(collect_texts(extra.get("reasoning_content")))
    return parts


def _tool_calls(message: dict[str, Any], extra: dict[str, Any]) -> list[Step]:
    """LangChain's parsed `tool_calls` ({name, args, id}), else the provider's raw ones ({id, function})."""
    raw = message.get("tool_calls") or extra.get("tool_calls")
    calls: list[Step] = []
    for entry in raw if isinstance(raw, list) else []:
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict):
            calls.extend(call_steps(entry.get("id"), function.get("name"), function.get("arguments")))
        elif isinstance(entry, dict):
            calls.extend(call_steps(entry.get("id"), entry.get("name"), entry.get("args", entry.get("arguments"))))
    legacy = message.get("function_call") or extra.get("function_call")
    if isinstance(legacy, dict):
        calls.extend(call_steps(None, legacy.get("name"), legacy.get("arguments")))
    return calls


def _add_text(parts: Parts, block: dict[str, Any]) -> None:
    text = block.get("text", block.get("refusal"))
    if isinstance(text, str):
        parts.texts.append(text)


def _add_call(parts: Parts, block: dict[str, Any]) -> None:
    parts.calls.extend(call_steps(block.get("id"), block.get("name"), block.get("input")))


def _add_result(parts: Parts, block: dict[str, Any]) -> None:
    is_error = block.get("is_error") is True
    parts.results.append(_result(block.get("tool_use_id"), None, block.get("content"), is_error))


def _add_reasoning(parts: Parts, block: dict[str, Any]) -> None:
    text = block.get("thinking", block.get("reasoning", block.get("text")))
    parts.reasoning.extend(collect_texts(block.get("summary")) if text is None else collect_texts(text))


def _add_image(parts: Parts, block: dict[str, Any]) -> None:
    parts.texts.append(image_text(block, _URL_KEY))


_BLOCKS: dict[str, BlockReader] = {
    "text": _add_text,
    "input_text": _add_text,
    "output_text": _add_text,
    "refusal": _add_text,
    "tool_use": _add_call,
    "tool_result": _add_result,
    "thinking": _add_reasoning,
    "reasoning": _add_reasoning,
    "image": _add_image,
    "image_url": _add_image,
    "input_image": _add_image,
}


def _result(call_id: Any, name: Any, output: Any, is_error: bool) -> Step:
    return result_step(call_id, name, result_text(output, _URL_KEY), is_error)


def _is_pair(value: Any) -> bool:
    """A LangChain message tuple such as ["human", "hello"]."""
    return isinstance(value, list) and len(value) == 2 and all(isinstance(part, str) for part in value)


# --- trace facts and spans ---------------------------------------------------------------------


def _trace_metadata(trace_id: str, timeline: list[Run]) -> dict[str, Any]:
    root = next((run for run in timeline if run["id"] == trace_id), timeline[0])
    llm_runs = [run for run in timeline if run.get("run_type") == "llm"]
    metadata: dict[str, Any] = {}
    for key, value in (
        ("run_name", root.get("name")),
        ("session_name", next((run["session_name"] for run in timeline if nonblank(run.get("session_name"))), None)),
        ("provider", next(filter(None, (_run_metadata(run).get("ls_provider") for run in llm_runs)), None)),
        ("thread_id", next(filter(None, (_run_metadata(run).get("thread_id") for run in timeline)), None)),
        ("sdk", _runtime(root).get("sdk")),
        ("sdk_version", _runtime(root).get("sdk_version")),
    ):
        if nonblank(value):
            metadata[key] = value
    if isinstance(root.get("tags"), list) and root["tags"]:
        metadata["tags"] = root["tags"]
    models = list(dict.fromkeys(model for run in llm_runs if (model := _model(run))))
    metadata.update({"model": models[0]} if models else {})
    metadata.update({"models": models} if len(models) > 1 else {})
    usage = _usage(llm_runs)
    metadata.update({"usage": usage} if usage else {})
    return metadata


def _model(run: Run) -> str | None:
    extra = object_or_empty(run.get("extra"))
    params = object_or_empty(extra.get("invocation_params"))
    inputs = object_or_empty(run.get("inputs"))
    candidates = (_run_metadata(run).get("ls_model_name"), params.get("model"), params.get("model_name"))
    return next((model for model in (*candidates, inputs.get("model")) if nonblank(model)), None)


def _usage(llm_runs: list[Run]) -> dict[str, int]:
    """Token totals over the llm runs, from `usage_metadata` (raw or on the generated message)."""
    totals: dict[str, int] = {}
    for run in llm_runs:
        usage = _run_usage(decode_nested(run.get("outputs")))
        details = object_or_empty(usage.get("output_token_details"))
        counts = {key: usage.get(key) for key in ("input_tokens", "output_tokens", "total_tokens")}
        counts["reasoning_tokens"] = details.get("reasoning")
        for key, count in counts.items():
            if isinstance(count, int) and not isinstance(count, bool):
                totals[key] = totals.get(key, 0) + count
    return totals


def _run_usage(outputs: Any) -> dict[str, Any]:
    if not isinstance(outputs, dict):
        return {}
    if isinstance(outputs.get("usage_metadata"), dict):
        return outputs["usage_metadata"]
    message = _answer(outputs)
    plain = _plain(message) if isinstance(message, dict) else None
    usage = plain.get("usage_metadata") if plain else None
    return usage if isinstance(usage, dict) else {}


def _run_metadata(run: Run) -> dict[str, Any]:
    extra = run.get("extra")
    metadata = extra.get("metadata") if isinstance(extra, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def _runtime(run: Run) -> dict[str, Any]:
    extra = run.get("extra")
    runtime = extra.get("runtime") if isinstance(extra, dict) else None
    return runtime if isinstance(runtime, dict) else {}


def _spans(timeline: list[Run], contributed: dict[int, tuple[int, ...]]) -> tuple[Span, ...]:
    spans = (_span(run, contributed.get(index, ())) for index, run in enumerate(timeline))
    return tuple(span for span in spans if span is not None)


def _span(run: Run, step_indices: tuple[int, ...]) -> Span | None:
    """One run as a span; a run without a start time has none."""
    start = epoch_ns(run.get("start_time"))
    if start is None:
        return None
    output = decode_nested(run.get("outputs"))
    if run.get("error"):
        output = {**(output if isinstance(output, dict) else {}), "error": run["error"]}
    return Span(
        id=run["id"],
        name=nonblank(run.get("name")) or str(run.get("run_type") or "run"),
        start_ns=start,
        end_ns=max(start, epoch_ns(run.get("end_time")) or start),
        parent_id=_parent_id(run),
        kind=nonblank(run.get("run_type")),
        # An llm run's input is the whole history again; the steps already hold it.
        input=None if run.get("run_type") == "llm" else decode_nested(run.get("inputs")),
        output=output,
        step_indices=step_indices,
    )
