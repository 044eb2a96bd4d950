"""The skill's rendering, what the task model sees, and how the reflection model's replies are read."""

import pytest
import yaml

from stash_common.errors import FailedPrecondition
from stash_gepa.job_contract import GepaExample, Message
from stash_gepa.worker.skill import (
    SkillIdentity,
    parse_body,
    parse_identity,
    reflection_prompt,
    render_skill,
    task_messages,
)

IDENTITY = SkillIdentity(name="refund-desk", description="Use when a customer asks for a refund.")


def _frontmatter(skill_md: str) -> dict[str, str]:
    _, header, _ = skill_md.split("---\n", 2)
    return yaml.safe_load(header)  # type: ignore[no-any-return]


def test_a_skill_is_frontmatter_a_blank_line_then_the_body() -> None:
    assert render_skill(IDENTITY, "# Body") == (
        "---\nname: refund-desk\ndescription: Use when a customer asks for a refund.\n---\n\n# Body"
    )


@pytest.mark.parametrize("description", ["Use when: refunds", "a # b", 'it\'s "quoted"', "[list] like", "ends:"])
def test_a_description_yaml_would_misread_is_quoted_and_reads_back_unchanged(description: str) -> None:
    skill = render_skill(SkillIdentity(name="x", description=description), "body")

    assert _frontmatter(skill) == {"name": "x", "description": description}


def test_the_task_model_sees_the_system_prompt_a_blank_line_then_the_skill_then_the_input() -> None:
    example = GepaExample(
        trace_id="t", system="Be kind.", messages=[Message(role="user", content="Refund?")], feedback=[]
    )

    messages = task_messages(example, IDENTITY, "SKILL")

    assert messages == [
        {"role": "system", "content": 'Be kind.\n\n<skill name="refund-desk">\nSKILL\n</skill>'},
        {"role": "user", "content": "Refund?"},
    ]


def test_without_a_system_prompt_the_system_message_is_the_skill_alone() -> None:
    example = GepaExample(trace_id="t", system=None, messages=[Message(role="user", content="Hi")], feedback=[])

    assert task_messages(example, IDENTITY, "SKILL")[0]["content"] == '<skill name="refund-desk">\nSKILL\n</skill>'


def test_the_name_is_normalised_to_lowercase_letters_digits_and_hyphens() -> None:
    identity = parse_identity('Here: {"name": "  Refund Desk v2!! ", "description": "Use   when\\nrefunds."}')

    assert identity == SkillIdentity(name="refund-desk-v2", description="Use when refunds.")


def test_an_overlong_name_and_description_are_cut_to_their_limits() -> None:
    identity = parse_identity('{"name": "' + "a" * 100 + '", "description": "' + "d" * 2000 + '"}')

    assert (len(identity.name), len(identity.description)) == (64, 1024)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I would call it refund-desk.", "did not name the skill as JSON"),
        ('{"name": "!!!", "description": "Use it."}', "named the skill unusably"),
        ('{"name": "ok", "description": ""}', "named the skill unusably"),
    ],
)
def test_an_unusable_name_fails_with_the_reply_quoted(reply: str, reason: str) -> None:
    with pytest.raises(FailedPrecondition, match=reason) as raised:
        parse_identity(reply)

    assert repr(reply[:20])[1:-1] in raised.value.message


@pytest.mark.parametrize(
    "reply",
    [
        "# Steps\n\n1. Do it.",
        "```markdown\n# Steps\n\n1. Do it.\n```",
        "---\nname: x\ndescription: y\n---\n\n# Steps\n\n1. Do it.",
        "  \n# Steps\n\n1. Do it.\n\n",
    ],
)
def test_the_body_comes_back_without_a_fence_or_frontmatter_the_model_added(reply: str) -> None:
    assert parse_body(reply) == "# Steps\n\n1. Do it."


def test_an_empty_body_is_refused() -> None:
    with pytest.raises(FailedPrecondition, match="empty skill body"):
        parse_body("```\n\n```")


def test_the_reflection_prompt_says_to_return_only_the_body_and_carries_every_record() -> None:
    records = [{"Inputs": "User: a", "Generated Outputs": "Assistant: b", "Feedback": "Reward model score: 0.4"}]

    prompt = reflection_prompt("# Current", records)

    assert "Return only the body" in prompt
    assert "# Current body\n# Current" in prompt
    assert "### Task\nUser: a\n### Agent's reply\nAssistant: b\n### Feedback\nReward model score: 0.4" in prompt
