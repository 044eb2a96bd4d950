"""The skill GEPA evolves: how it is rendered, shown to the task model, named, seeded and proposed.

A candidate is one text component, `skill_body`. The full skill is the spec's SKILL.md: YAML
frontmatter with `name` and `description`, a blank line, then the body. The task model sees it
inside `<skill name="...">` tags after the example's own system prompt; the agent's system prompt is
never rewritten. Plain Python, no provider and no torch: the prompts and the parsing of replies are
tested on their own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from stash_common.errors import FailedPrecondition
from stash_common.jobs.files import describe
from stash_gepa.job_contract import MAX_DESCRIPTION, SKILL_NAME, GepaExample

COMPONENT = "skill_body"
SEED_BODY = """# How to work on these requests

1. Read the whole request before acting and restate the goal in one sentence.
2. Use tools to check facts instead of guessing; quote what a tool returned.
3. Finish what was asked, then say plainly what was done and what is left."""
BODY_INSTRUCTIONS = (
    "You improve a skill for an AI agent. A skill is a SKILL.md file the agent loads into its context:"
    " YAML frontmatter (name, description) that the platform writes, then Markdown instructions, the body,"
    " which you write. Below are the current body, then tasks the agent answered with it, its replies,"
    " and feedback on each reply (a reward model's score from 0 to 1, reviewers' comments and evidence"
    " from earlier training). Write a better body: general, concrete instructions that would have earned"
    " better feedback on these tasks and on similar ones. Return only the body, as Markdown: no frontmatter,"
    " no code fence around it, no commentary before or after it."
)
NAMING_INSTRUCTIONS = (
    "You name a skill for an AI agent: a SKILL.md the agent loads when it works on tasks like the ones below."
    ' Reply with JSON only: {"name": "...", "description": "..."}. The name is 1 to 64 characters of lowercase'
    " letters, digits and hyphens. The description is one or two sentences, at most 1024 characters, that"
    " say when the agent should use the skill."
)
# Starts with a letter or digit and holds nothing YAML gives a meaning to inside a plain value.
PLAIN_SCALAR = re.compile(r"[A-Za-z0-9][^\n\"'`{}\[\]]*[^\s:]|[A-Za-z0-9]")
EXCERPT_CHARS = 600  # of each input message shown when naming the skill
NAMING_EXAMPLES = 5


class SkillIdentity(BaseModel):
    """The skill's frontmatter, as validated."""

    model_config = ConfigDict(frozen=True, strict=True)

    name: str = Field(pattern=SKILL_NAME.pattern)
    description: str = Field(min_length=1, max_length=MAX_DESCRIPTION)


def render_skill(identity: SkillIdentity, body: str) -> str:
    """The full SKILL.md: frontmatter, a blank line, the body."""
    return f"---\nname: {identity.name}\ndescription: {yaml_scalar(identity.description)}\n---\n\n{body}"


def yaml_scalar(text: str) -> str:
    """`text` as a YAML value: plain when YAML reads it back unchanged, else double-quoted (JSON is valid YAML)."""
    return text if PLAIN_SCALAR.fullmatch(text) and ": " not in text and " #" not in text else json.dumps(text)


def task_system_prompt(example: GepaExample, identity: SkillIdentity, skill_md: str) -> str:
    """The task model's system message: the example's own system prompt, a blank line, then the skill."""
    block = f'<skill name="{identity.name}">\n{skill_md}\n</skill>'
    return f"{example.system}\n\n{block}" if example.system else block


def task_messages(example: GepaExample, identity: SkillIdentity, skill_md: str) -> list[dict[str, str]]:
    """What the task model gets for one example: the system message, then the example's input."""
    system = {"role": "system", "content": task_system_prompt(example, identity, skill_md)}
    return [system, *({"role": message.role, "content": message.content} for message in example.messages)]


def naming_prompt(examples: Sequence[GepaExample]) -> str:
    """What the reflection model reads to name the skill: excerpts of the first examples' input."""
    tasks = "\n\n".join(
        f"Task {number}:\n" + "\n".join(message.content[:EXCERPT_CHARS] for message in example.messages)
        for number, example in enumerate(examples[:NAMING_EXAMPLES], start=1)
    )
    return f"{NAMING_INSTRUCTIONS}\n\n{tasks}"


def parse_identity(reply: str) -> SkillIdentity:
    """The name and description in the reflection model's reply, normalised, then validated.

    A reply that is no JSON object, or whose name has no letter or digit, fails the run with the
    reply quoted: a skill cannot be rendered without them.
    """
    found = re.search(r"\{.*\}", reply, re.DOTALL)
    try:
        fields: Any = json.loads(found.group(0)) if found else None
    except json.JSONDecodeError:
        fields = None
    if not isinstance(fields, Mapping):
        raise FailedPrecondition(f"the reflection model did not name the skill as JSON; it replied: {reply[:300]!r}")
    name = re.sub(r"[^a-z0-9]+", "-", str(fields.get("name", "")).lower()).strip("-")[:64].rstrip("-")
    description = " ".join(str(fields.get("description", "")).split())[:MAX_DESCRIPTION]
    try:
        return SkillIdentity(name=name, description=description)
    except ValidationError as error:
        raise FailedPrecondition(
            f"the reflection model named the skill unusably ({describe(error)}); it replied: {reply[:300]!r}"
        ) from error


def reflection_prompt(body: str, records: Sequence[Mapping[str, Any]]) -> str:
    """What the reflection model reads to propose a new body: the instructions, the body, the examples."""
    examples = "\n\n".join(
        f"## Example {number}\n### Task\n{record['Inputs']}\n### Agent's reply\n{record['Generated Outputs']}\n"
        f"### Feedback\n{record['Feedback']}"
        for number, record in enumerate(records, start=1)
    )
    return f"{BODY_INSTRUCTIONS}\n\n# Current body\n{body}\n\n# Examples\n{examples}"


def parse_body(reply: str) -> str:
    """The body in the reflection model's reply, without a fence or frontmatter it added anyway."""
    text = reply.strip()
    fenced = re.fullmatch(r"```[a-zA-Z]*\n(.*?)\n?```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1).strip()
    frontmatter = re.match(r"---\n.*?\n---\n", text, re.DOTALL)
    if frontmatter:
        text = text[frontmatter.end() :].strip()
    if not text:
        raise FailedPrecondition("the reflection model proposed an empty skill body")
    return text
