"""GEPA's examples: input before the first assistant step, feedback in people's words first, a seeded split."""

import re

import pytest

from stash_common.errors import FailedPrecondition
from stash_common.steps import TraceStep
from stash_gepa.examples import (
    CHARS_PER_TOKEN,
    FEEDBACK_TOKENS,
    MIN_EXCERPT_CHARS,
    Comment,
    ExampleTrace,
    Finding,
    budget_warning,
    build_example,
    build_examples,
    feedback_lines,
    fit_comments,
    validation_ids,
)
from stash_gepa.job_contract import GepaExample, Message


def _steps(*roles_and_texts: tuple[str, str]) -> tuple[TraceStep, ...]:
    return tuple(
        TraceStep(id=f"s{index}", index=index, role=role, content=text)  # type: ignore[arg-type]
        for index, (role, text) in enumerate(roles_and_texts)
    )


def _trace(steps: tuple[TraceStep, ...], **parts: object) -> ExampleTrace:
    fields: dict[str, object] = {"comments": (), "findings": (), "pairs": (), **parts}
    return ExampleTrace(id="t1", steps=steps, **fields)  # type: ignore[arg-type]


OTHER_TRACE = "User: a\n\nAssistant: No."
SUPPORT = _steps(
    ("system", "You are the shop's agent."),
    ("user", "I want a refund for order 1182"),
    ("system", "Be brief."),
    ("user", "It arrived broken."),
    ("assistant", "Let me check."),
    ("user", "Thanks"),
)


def test_the_input_is_every_non_system_step_before_the_first_assistant_step_and_system_is_joined() -> None:
    example = build_example(_trace(SUPPORT))

    assert example is not None
    assert example.system == "You are the shop's agent.\n\nBe brief."
    assert [message.content for message in example.messages] == ["I want a refund for order 1182", "It arrived broken."]
    assert {message.role for message in example.messages} == {"user"}


def test_a_trace_without_system_steps_has_no_system_prompt() -> None:
    example = build_example(_trace(_steps(("user", "hello"), ("assistant", "hi"))))

    assert example is not None and example.system is None


def test_a_trace_that_opens_with_the_assistant_is_skipped_and_none_left_fails_the_run() -> None:
    opening = _trace(_steps(("system", "You are helpful."), ("assistant", "Hello! How can I help?"), ("user", "x")))

    assert build_example(opening) is None
    with pytest.raises(FailedPrecondition, match="none of the reward model's 1 selected traces has input before"):
        build_examples([opening])


def test_feedback_quotes_unflagged_comments_then_findings_included_in_training_then_pairs() -> None:
    trace = _trace(
        SUPPORT,
        comments=(
            Comment(step_id="s4", text="Should have apologised", quote="check", label_error=False),
            Comment(step_id=None, text="wrong label", quote=None, label_error=True),
            Comment(step_id=None, text="Slow overall", quote=None, label_error=False, author="rita"),
        ),
        findings=(
            Finding(4, "negative", "high", "ignored the broken item", "It arrived broken.", True),
            Finding(4, "positive", "low", "not trained on", None, False),
        ),
        pairs=(
            {
                "source": "automatic",
                "chosen_step_id": "s4",
                "rejected_step_id": "s4",
                "chosen_credit": 0.5,
                "rejected_credit": -0.25,
            },
            {
                "source": "explicit",
                "chosen_step_id": "s4",
                "rejected_step_id": "elsewhere",
                "rejected": OTHER_TRACE,
            },
            {"source": "explicit", "granularity": "trace", "chosen_trace_id": "other", "rejected_trace_id": "t1"},
        ),
    )

    feedback = build_example(trace).feedback  # type: ignore[union-attr]

    assert feedback == [
        'A reviewer commented on step 4 (Assistant: Let me check.) about "check": Should have apologised',
        "A reviewer commented on the whole trace: Slow overall (by rita)",
        "Training judged step 4 (Assistant: Let me check.) negative (high confidence): ignored the broken item."
        ' Evidence: "It arrived broken."',
        "Training preferred step 4 (Assistant: Let me check.) over step 4 (Assistant: Let me check.)"
        " (automatic, credit 0.50 against -0.25)",
        "Training preferred step 4 (Assistant: Let me check.) over another trace's action ending"
        " “User: a Assistant: No.” (explicit)",
        "Training ranked this whole trace below another of the selected traces (explicit)",
    ]


def test_every_comment_stays_and_evidence_beyond_the_budget_is_counted_not_dropped_silently() -> None:
    comments = tuple(Comment(step_id=None, text=f"note {n}", quote=None, label_error=False) for n in range(50))
    findings = tuple(Finding(4, "negative", "high", "r" * 200, None, True) for _ in range(60))

    feedback = feedback_lines(_trace(SUPPORT, comments=comments, findings=findings))

    assert feedback[:50] == [f"A reviewer commented on the whole trace: note {n}" for n in range(50)]
    kept = len(feedback) - 51
    assert 0 < kept < 60
    assert feedback[-1] == (
        f"({60 - kept} more training evidence line(s) left out: the feedback token budget is spent)"
    )
    assert sum(map(len, feedback[:-1])) <= FEEDBACK_TOKENS * CHARS_PER_TOKEN


def test_comments_over_the_budget_become_marked_excerpts_and_short_ones_stay_whole() -> None:
    long_text = "The refund went to the wrong card and nobody told the customer. " * 40
    comments = (
        Comment(step_id=None, text="Too slow.", quote=None, label_error=False),
        Comment(step_id="s4", text=long_text, quote=None, label_error=False),
        Comment(step_id=None, text=long_text, quote=None, label_error=False),
        Comment(step_id=None, text="flagged " * 100, quote=None, label_error=True),
    )

    feedback = feedback_lines(_trace(SUPPORT, comments=comments), budget_tokens=300)

    assert len(feedback) == 3
    assert feedback[0] == "A reviewer commented on the whole trace: Too slow."
    assert all(re.search(r"… \[excerpt: [\d,]+ of [\d,]+ characters\]$", line) for line in feedback[1:])
    assert feedback[1].startswith("A reviewer commented on step 4 (Assistant: Let me check.): The refund went")
    assert sum(map(len, feedback)) <= 300 * CHARS_PER_TOKEN + 2 * len("… [excerpt: 9,999 of 9,999 characters]")


def test_fitting_comments_never_cuts_below_the_minimum_excerpt() -> None:
    lines = ["x" * 500] * 40

    fitted = fit_comments(lines, 1000)

    assert len(fitted) == 40
    assert all(line.startswith("x" * MIN_EXCERPT_CHARS + "… [excerpt: 80 of 500") for line in fitted)


def _examples(count: int) -> list[GepaExample]:
    message = Message(role="user", content="hi")
    return [GepaExample(trace_id=f"trace-{n}", system=None, messages=[message], feedback=[]) for n in range(count)]


def test_a_third_validates_in_a_seeded_order_that_does_not_depend_on_the_input_order() -> None:
    examples = _examples(9)

    chosen = validation_ids(examples, seed=0)

    assert len(chosen) == 3
    assert validation_ids(list(reversed(examples)), seed=0) == chosen
    assert validation_ids(examples, seed=1) != chosen  # with these nine ids, another seed picks another third


def test_one_example_validates_and_trains() -> None:
    assert validation_ids(_examples(1), seed=0) == ["trace-0"]


def test_the_budget_warning_names_the_calls_needed_for_more_than_one_candidate() -> None:
    assert budget_warning(17, validation=2, minibatch=3) is None
    warning = budget_warning(16, validation=2, minibatch=3)

    assert warning is not None
    assert warning.startswith("max_metric_calls 16 is below 17 (V + 3(R + V) with V = 2 validation examples and R = 3")
