"""Section summary evidence: bounded, bound to each range, and every request of a range named."""

from stash_common.steps import TraceStep
from stash_labeler.assessments.summaries import PRECEDING_EVENTS, SAMPLED_EVENTS, prompt_and_schema, ranges_of


def _steps() -> list[TraceStep]:
    steps = [TraceStep("ask-1", 0, "user", "Rename the module")]
    steps += [TraceStep(f"call-{n}", len(steps) + n, "assistant", "", tool_name="Edit") for n in range(100)]
    steps.append(TraceStep("ask-2", len(steps), "user", "Also update the changelog"))
    steps.append(TraceStep("done", len(steps), "assistant", "Both done."))
    return steps


def test_a_range_over_two_requests_names_both_with_bounded_events() -> None:
    steps = _steps()
    (step_range,) = ranges_of(steps, [("call-50", "done")])

    prompt, schema = prompt_and_schema([step_range])

    requests = prompt.split("Requests:\n", 1)[1].split("\nProgress messages:", 1)[0].splitlines()
    assert requests == ["[ask-1] user: Rename the module", "[ask-2] user: Also update the changelog"]
    preceding = prompt.split("(context only):\n", 1)[1].split("\nSampled events", 1)[0].splitlines()
    assert len(preceding) == PRECEDING_EVENTS and preceding[-1].startswith("[call-49]")
    sampled = prompt.split("Sampled events of the section:\n", 1)[1].splitlines()
    assert len(sampled) == SAMPLED_EVENTS and sampled[-1].startswith("[done]")
    assert "assess it against each of them separately" in prompt
    assert schema["properties"]["range_1"]["properties"]["first_step_id"]["const"] == "call-50"


def test_the_cache_key_changes_with_the_preceding_context_only_when_it_changes() -> None:
    steps = _steps()
    edited = [*steps[:45], TraceStep("call-44", 45, "assistant", "", tool_name="Write"), *steps[46:]]

    (before,) = ranges_of(steps, [("call-50", "done")])
    (after,) = ranges_of(edited, [("call-50", "done")])
    (far,) = ranges_of(edited, [("call-70", "done")])

    assert before.key["source_hash"] == after.key["source_hash"]
    assert before.key["context_hash"] != after.key["context_hash"]
    assert far.key == ranges_of(steps, [("call-70", "done")])[0].key
