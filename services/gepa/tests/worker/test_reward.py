"""RewardMetric: how OpenMP threads wait (the worker makes them wait passively) changes no score."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from stash_common.reward_model.packaged import packaged_model_dir
from stash_common.reward_model.stats import REWARD_STATS_FILE

# Scores conversations with a seeded fresh head, in a process of its own (OpenMP reads its settings once).
SCORE = """
import json, os, sys
from pathlib import Path
import stash_gepa.worker.reward as reward
import torch
from stash_gepa.job_contract import GepaJob

torch.manual_seed(0)
job = GepaJob(
    reward_model_key="k", task_model="t", task_api_base=None, reflection_model="r", max_metric_calls=4,
    job_id="j", reward_model_id="m", owner_id="o", gepa_run_id="g", report_address="a",
    validation_trace_ids=["x"], max_length=128,
)
metric = reward.RewardMetric(Path(sys.argv[1]), job)
texts = ["user: I want a refund.", "user: I want a refund.\\n\\nassistant: Approved, reference R-1.", "user: hi"]
print(json.dumps({"policy": os.environ["OMP_WAIT_POLICY"], "scores": metric.scores(texts)}))
"""


def _scores(model_dir: Path, wait_policy: str) -> dict[str, object]:
    env = {**os.environ, "OMP_WAIT_POLICY": wait_policy, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SCORE, str(model_dir)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_passive_waiting_changes_no_score(tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    shutil.copytree(packaged_model_dir(), model_dir)
    (model_dir / REWARD_STATS_FILE).write_text(json.dumps({"mean": 0.0, "std": 1.0}))
    passive, active = _scores(model_dir, "PASSIVE"), _scores(model_dir, "ACTIVE")
    assert (passive["policy"], active["policy"]) == ("PASSIVE", "ACTIVE")
    assert isinstance(passive["scores"], list) and isinstance(active["scores"], list)
    assert len(set(passive["scores"])) == 3
    assert all(abs(a - b) < 1e-5 for a, b in zip(passive["scores"], active["scores"], strict=True))
