"""One GEPA run of 40 metric calls: where its wall time goes, and gepa's own DefaultAdapter on the same run.

    .venv/bin/python bench/gepa_run.py [--latency-ms 50] [--examples 12] [--max-metric-calls 40]

The GEPA worker (`python -m stash_common.jobs.worker gepa`) runs a job directory with 12 support examples against
a reward model whose checkpoint is the packaged all-MiniLM-L6-v2 with a seeded fresh score head
(scoring costs the same whatever the weights hold), stored in a local object store. The task and reflection
models are the tests' stand-in OpenAI-compatible server, answering each request after `--latency-ms`;
the task model's reply depends on the skill, so GEPA has something to find. The worker reports the
wall time of its task-model phases (calls in flight at once, up to 8), reward-model scoring and
reflection, and its start-up (reading the job, fetching the checkpoint, importing torch, loading the
model); the rest is gepa's own loop. The reward model's share is printed of the whole run and of
the optimisation after start-up.

The anchor is gepa's own `DefaultAdapter` (the task model through LiteLLM, a contains-the-answer
metric) in `gepa.optimize` with the same examples, split, budget, minibatch, stand-in models and
latency, in its own process: the ratio says what our adapter (the reward model, the skill rendering)
adds to GEPA's loop. Both runs happen one after the other on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes.llm_server import FakeLLM  # noqa: E402

from stash_common import worker_storage  # noqa: E402
from stash_common.reward_model.packaged import packaged_model_dir  # noqa: E402
from stash_common.reward_model.stats import REWARD_STATS_FILE  # noqa: E402
from stash_common.storage import make_object_store  # noqa: E402
from stash_gepa import job_contract as contract  # noqa: E402
from stash_gepa.examples import validation_ids  # noqa: E402

TASK, REFLECTION = "stand-in-task", "stand-in-reflection"
MODEL_KEY = "reward-models/bench/model.tar.gz"
RULE = "Always give the customer the refund reference number."


def stand_in(path: str, body: dict[str, Any]) -> str:
    """A task model that follows the skill, and a reflection model that names it and proposes the rule."""
    messages = body["messages"]
    if body["model"] == REFLECTION:
        if messages[-1]["content"].startswith("You name a skill"):
            return '{"name": "refund-desk", "description": "Use when a customer asks for a refund."}'
        return f"# Refunds\n\n1. Approve the refund.\n2. {RULE}"
    order = re.search(r"order (\d+)", messages[-1]["content"])
    number = order.group(1) if order else "0"
    if "reference number" in messages[0]["content"]:
        return f"Your refund for order {number} is approved; the reference number is R-{number}."
    return f"Sorry, I cannot help with order {number}."


def examples(count: int) -> list[contract.GepaExample]:
    """Support requests of mixed lengths (a sentence to a few paragraphs)."""
    detail = "The parcel arrived late, the box was crushed and one of the items is missing. "
    return [
        contract.GepaExample(
            trace_id=f"trace-{number:03d}",
            system="You are the support agent of an online shop.",
            messages=[
                contract.Message(role="user", content=f"I want a refund for order {1000 + number}. {detail * number}")
            ],
            feedback=["A reviewer commented on the whole trace: always give the reference number"],
        )
        for number in range(count)
    ]


def store_checkpoint(data_dir: Path) -> None:
    """The packaged MiniLM with a seeded score head and reward statistics, archived into the local object
    store as a trainer would: every run scores the same, so GEPA accepts the same candidates."""
    import torch

    from stash_common.reward_model.checkpoint import load_checkpoint

    with tempfile.TemporaryDirectory() as scratch:
        model_dir = Path(scratch) / "model"
        torch.manual_seed(0)
        model, tokenizer = load_checkpoint(packaged_model_dir(), "cpu", 512)
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
        (model_dir / REWARD_STATS_FILE).write_text(json.dumps({"mean": 0.0, "std": 1.0}))
        objects = make_object_store(data_dir, None, None, None, "http://127.0.0.1", None)
        worker_storage.store_checkpoint(objects, MODEL_KEY, model_dir)


def write_job(job_dir: Path, llm: FakeLLM, args: argparse.Namespace) -> list[contract.GepaExample]:
    chosen = examples(args.examples)
    job = contract.GepaJob(
        reward_model_key=MODEL_KEY,
        task_model=f"openai/{TASK}",
        task_api_base=f"{llm.url}/v1",
        reflection_model=f"openai/{REFLECTION}",
        max_metric_calls=args.max_metric_calls,
        job_id="bench",
        reward_model_id="bench",
        owner_id="bench",
        gepa_run_id="bench",
        report_address="127.0.0.1:1",  # unused: a job directory run in place reports nothing
        reflection_api_base=f"{llm.url}/v1",
        validation_trace_ids=validation_ids(chosen, 0),
        max_length=512,
    )
    job_dir.mkdir(parents=True)
    contract.write_job(job_dir, job)
    contract.write_examples(job_dir, chosen)
    return chosen


def run_anchor(job_dir: Path) -> None:
    """gepa's DefaultAdapter on the job's examples, split and budget (run in its own process)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import gepa
    import litellm
    from gepa.adapters.default_adapter.default_adapter import DefaultAdapter

    job = contract.read_job(job_dir)
    assert job.task_api_base is not None
    api_base = job.task_api_base
    chosen = set(job.validation_trace_ids)
    data = [
        {
            "id": example.trace_id,
            "input": example.messages[0].content,
            "additional_context": {},
            "answer": "reference number",
        }
        for example in contract.read_examples(job_dir)
    ]

    def task_model(messages: list[dict[str, str]]) -> str:
        reply = litellm.completion(model=job.task_model, messages=messages, api_base=api_base, api_key="unused")
        return str(reply.choices[0].message.content)

    started = time.perf_counter()
    outcome = gepa.optimize(
        seed_candidate={"system_prompt": "You are the support agent of an online shop."},
        trainset=[row for row in data if row["id"] not in chosen],
        valset=[row for row in data if row["id"] in chosen],
        adapter=DefaultAdapter(model=task_model),
        reflection_lm=job.reflection_model,
        reflection_lm_kwargs={"api_base": api_base, "api_key": "unused"},
        max_metric_calls=job.max_metric_calls,
        reflection_minibatch_size=job.reflection_minibatch_size,
        seed=job.seed,
    )
    result = {"total_s": time.perf_counter() - started, "metric_calls": outcome.total_metric_calls}
    (job_dir / "anchor.json").write_text(json.dumps(result))


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--examples", type=int, default=12)
    parser.add_argument("--max-metric-calls", type=int, default=40)
    parser.add_argument("--anchor", type=Path, help=argparse.SUPPRESS)  # internal: run the anchor on a job dir
    args = parser.parse_args()
    if args.anchor is not None:
        run_anchor(args.anchor)
        return
    llm = FakeLLM().start()
    llm.reply, llm.delay_s = stand_in, args.latency_ms / 1000
    with tempfile.TemporaryDirectory(prefix="stash-gepa-bench-") as scratch:
        data_dir, job_dir = Path(scratch) / "data", Path(scratch) / "job"
        store_checkpoint(data_dir)
        write_job(job_dir, llm, args)
        env = {**os.environ, "STASH_DATA_DIR": str(data_dir), "PYTHONPATH": os.pathsep.join(sys.path)}
        worker_wall = timed([sys.executable, "-m", "stash_common.jobs.worker", "gepa", str(job_dir)], env)
        result = contract.GepaResult.model_validate_json((job_dir / contract.RESULT_FILE).read_text())
        anchor_wall = timed([sys.executable, __file__, "--anchor", str(job_dir)], env)
        anchor = json.loads((job_dir / "anchor.json").read_text())
    llm.stop()
    assert result.timings is not None, "the worker wrote no timings"
    if result.error:
        raise SystemExit(f"the GEPA run failed: {result.error}")
    report(result, worker_wall, anchor, anchor_wall, args)


def report(
    result: contract.GepaResult, worker_wall: float, anchor: dict[str, Any], anchor_wall: float, args: Any
) -> None:
    timings = result.timings
    assert timings is not None
    parts = {
        "task model (calls overlap)": timings.task_model_s,
        "reward model (scoring)": timings.reward_model_s,
        "reflection model": timings.reflection_s,
    }
    parts["start-up (job, checkpoint, torch, model)"] = timings.startup_s
    parts["gepa's own loop and the rest"] = timings.total_s - sum(parts.values())
    table = Table(
        "part",
        "seconds",
        "share of the run",
        title=f"One GEPA run: {result.metric_calls} metric calls, {len(result.candidates)} candidates,"
        f" {args.examples} examples, stand-ins answering in {args.latency_ms:.0f} ms",
    )
    for name, seconds in parts.items():
        table.add_row(name, f"{seconds:.2f}", f"{seconds / timings.total_s:.1%}")
    table.add_section()
    table.add_row("worker run (total)", f"{timings.total_s:.2f}", "100%")
    table.add_row("worker process (with interpreter start)", f"{worker_wall:.2f}", "")
    table.add_row(f"anchor: gepa DefaultAdapter, {anchor['metric_calls']} calls", f"{anchor['total_s']:.2f}", "")
    table.add_row("anchor process", f"{anchor_wall:.2f}", "")
    table.add_row("ratio worker run / anchor run", f"{timings.total_s / anchor['total_s']:.2f}×", "")
    Console().print(table)
    console = Console()
    console.print(f"best score {result.best_score:.3f}, seed score {result.seed_score:.3f}")
    console.print(f"reward-model share {timings.reward_model_s / timings.total_s:.1%} of the run (goal: under 10%),")
    optimisation_s = timings.total_s - timings.startup_s
    console.print(f"{timings.reward_model_s / optimisation_s:.1%} of the optimisation after start-up")


if __name__ == "__main__":
    main()
