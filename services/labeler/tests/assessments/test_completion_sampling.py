"""Completion evidence: at most 104 events, requests and assistant messages kept, tool evidence spaced evenly."""

from stash_common.steps import TraceStep
from stash_labeler.assessments.completion import MAX_EVENTS, completion_evidence, sample


def _long_trace(tool_pairs: int) -> list[TraceStep]:
    steps = [TraceStep(id="request", index=0, role="user", content="Fix the failing test")]
    for pair in range(tool_pairs):
        index = len(steps)
        call = TraceStep(f"call-{pair}", index, "assistant", "", tool_name="Bash", tool_call_id=f"c{pair}")
        result = TraceStep(f"result-{pair}", index + 1, "tool", "ok", tool_name="Bash", tool_call_id=f"c{pair}")
        steps += [call, result]
        if pair % 50 == 0:
            steps.append(TraceStep(f"message-{pair}", len(steps), "assistant", f"Progress {pair}"))
    steps.append(TraceStep("followup", len(steps), "user", "Now publish it"))
    return steps


def test_a_long_trace_is_sampled_to_the_limit_keeping_requests_and_messages_in_order() -> None:
    steps = _long_trace(500)

    sampled = sample(steps)

    ids = [step.id for step in sampled]
    assert len(sampled) == MAX_EVENTS == 104
    assert {"request", "followup"} | {f"message-{pair}" for pair in range(0, 500, 50)} <= set(ids)
    assert ids[1] == "call-0" and ids[-2] == "result-499"  # tool evidence spans the whole trace
    order = {step.id: position for position, step in enumerate(steps)}
    assert ids == sorted(ids, key=order.__getitem__)


def test_a_short_trace_is_sent_whole_and_each_request_is_a_task() -> None:
    steps = _long_trace(3)

    evidence = completion_evidence(steps)

    assert [step.id for step in evidence.sampled] == [step.id for step in steps]
    assert [(task.first_step_id, task.last_step_id) for task in evidence.tasks] == [("request", "result-2")]
