"""Practice traces for the demo: enough support conversations for a reward model to learn from and be measured on.

The seven hand-written samples make a handful of preference pairs: a model trained on them stays at chance
and its held-out accuracy rests on one to three pairs. These traces add `PRACTICE_TRACES` conversations of a
support desk, generated with a fixed seed from two patterns the automatic labels tell apart:

- *checked*: the agent looks the facts up, answers from the tool's result, and the customer thanks it;
- *guessed*: the agent answers at once with a confident claim it never checked, the customer says it is
  wrong, then the agent looks the facts up and answers from them, and the customer thanks it.

Their automatic credit ranks an answer drawn from a tool result above the lookup, and the lookup above an
answer made up without one, so the trained model has a real, learnable preference, and a tenth of the
traces held out gives enough pairs to measure it. They are synthetic: the demo says so, and what the model
learns is agreement with this supervision, not a measure of any real agent.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PRACTICE_TRACES = 100
PRACTICE_SEED = 7
SYSTEM = "You are a support agent for an online shop. Look facts up with the tools before you state them."
THANKS = ("Thanks, perfect.", "Great, thank you!", "That works, thanks.", "Perfect, thank you so much.")
WRONG = ("That's wrong: {fact}.", "No, that is not right, {fact}.", "Nope, {fact}.", "That is not what I see: {fact}.")
NAMES = ("Ana", "Ben", "Chloe", "Dev", "Elif", "Femi", "Grace", "Hugo", "Ines", "Jonas", "Kai", "Lena")
ITEMS = ("blender", "desk lamp", "running shoes", "coffee grinder", "backpack", "monitor", "kettle", "headphones")
CARRIERS = ("DHL", "UPS", "Royal Mail", "DPD")


@dataclass(frozen=True)
class Case:
    """One generated support question: what the customer asks, the lookup that answers it, and two answers."""

    question: str
    tool_name: str
    tool_input: dict[str, Any]
    result: dict[str, Any]
    answer: str  # drawn from the result
    guess: str  # a confident claim the result contradicts
    correction: str  # what the customer knows that the guess got wrong


def _order_status(rng: random.Random, number: int) -> Case:
    item, carrier = rng.choice(ITEMS), rng.choice(CARRIERS)
    day = rng.randint(3, 27)
    return Case(
        question=f"Where is my order {number}? It's the {item}.",
        tool_name="lookup_order",
        tool_input={"order_id": str(number)},
        result={"order_id": str(number), "item": item, "status": "shipped", "carrier": carrier, "eta": f"Dec {day}"},
        answer=f"Your {item} (order {number}) shipped with {carrier} and is due on December {day}.",
        guess=f"Your order {number} was delivered yesterday and signed for at the front door.",
        correction=f"the tracking page says the {item} is still with {carrier}",
    )


def _refund_status(rng: random.Random, number: int) -> Case:
    amount = rng.randint(12, 240)
    refund_id = f"rf_{rng.randint(1000, 9999)}"
    return Case(
        question=f"Did my refund for order {number} go through?",
        tool_name="get_refund",
        tool_input={"order_id": str(number)},
        result={"refund_id": refund_id, "order_id": str(number), "amount": amount, "status": "issued"},
        answer=f"Yes: refund {refund_id} of ${amount}.00 for order {number} was issued to your card.",
        guess=f"There is no refund on order {number}; refunds need a manager's approval first.",
        correction=f"I got an email saying ${amount}.00 was refunded",
    )


def _return_window(rng: random.Random, number: int) -> Case:
    item, days = rng.choice(ITEMS), rng.choice((14, 30, 60))
    return Case(
        question=f"Can I still return the {item} from order {number}?",
        tool_name="get_return_policy",
        tool_input={"order_id": str(number), "item": item},
        result={"order_id": str(number), "item": item, "return_window_days": days, "days_since_delivery": days - 5},
        answer=f"Yes: the {item} has a {days}-day return window and arrived {days - 5} days ago: 5 days left.",
        guess=f"Returns for the {item} closed a week after delivery, so order {number} can't be returned.",
        correction=f"your own site says {item}s have a {days}-day return window",
    )


CASES: tuple[Callable[[random.Random, int], Case], ...] = (_order_status, _refund_status, _return_window)


def practice_traces(count: int = PRACTICE_TRACES, seed: int = PRACTICE_SEED) -> list[dict[str, Any]]:
    """`count` traces in the Stash format with stable ids, the same for the same seed; every other one guessed."""
    rng = random.Random(seed)
    traces = []
    for position in range(count):
        case = rng.choice(CASES)(rng, rng.randint(1000, 9999))
        steps = _guessed(case, rng) if position % 2 else _checked(case, rng)
        name = rng.choice(NAMES)
        metadata = {"agent": "support-bot", "customer": name, "synthetic": True}
        traces.append({"id": f"practice-{position + 1:03d}", "metadata": metadata, "steps": steps})
    return traces


def practice_jsonl(count: int = PRACTICE_TRACES, seed: int = PRACTICE_SEED) -> str:
    """The practice traces as one Stash JSONL import body."""
    return "".join(json.dumps(trace) + "\n" for trace in practice_traces(count, seed))


def _checked(case: Case, rng: random.Random) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": case.question},
        *_lookup_and_answer(case),
        {"role": "user", "content": rng.choice(THANKS)},
    ]


def _guessed(case: Case, rng: random.Random) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": case.question},
        {"role": "assistant", "content": case.guess},
        {"role": "user", "content": rng.choice(WRONG).format(fact=case.correction)},
        *_lookup_and_answer(case),
        {"role": "user", "content": rng.choice(THANKS)},
    ]


def _lookup_and_answer(case: Case) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": "", "tool_name": case.tool_name, "tool_input": case.tool_input,
         "tool_call_id": "call_1"},
        {"role": "tool", "content": json.dumps(case.result), "tool_name": case.tool_name, "tool_call_id": "call_1"},
        {"role": "assistant", "content": case.answer},
    ]  # fmt: skip
