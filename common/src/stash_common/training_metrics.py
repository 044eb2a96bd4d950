"""The metrics every training job reports: one key set for the worker, the trainer, the tests and the demo.

A reward model's metrics have the same shape whichever launcher ran its job: the worker writes exactly
these keys into `result.json`, a remote worker sends them to `TrainerService.CompleteJob`, and the
trainer refuses a report with a key missing or unknown rather than storing a partial record. A metric
that does not apply to a job (no held-out split, no action pairs) is null, never left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stash_common.errors import InvalidArgument

TRAINING_METRIC_KEYS: frozenset[str] = frozenset(
    {
        "train_pairs",  # preference pairs the model trained on
        "eval_pairs",  # held-out pairs, from traces the model never trained on
        "eval_accuracy",  # share of held-out pairs scored the right way round; null without held-out pairs
        "eval_split",  # how the held-out set was drawn: "trace" (whole traces, seeded)
        "excluded_cross_trace_pairs",  # pairs left out because their traces straddle train and eval
        "action_scoring_version",  # version of the per-action credit written; null when no action pair trained
        "action_train_pairs",  # training pairs that compare two assistant actions
        "action_eval_pairs",  # held-out pairs that compare two assistant actions
        "action_eval_accuracy",  # accuracy on the held-out action pairs; null without any
        "tool_eval_pairs",  # held-out action pairs that compare tool calls
        "tool_eval_accuracy",  # accuracy on the held-out tool-call pairs; null without any
        "final_loss",  # Bradley–Terry loss of the last optimizer step
        "epochs",  # passes over the training pairs
        "device",  # where the model trained: "cpu", "cuda" or "mps"
        "seconds",  # wall-clock duration of the whole job, from reading the directory to the last score
    }
)


def check_training_metrics(metrics: Mapping[str, Any]) -> None:
    """Refuse a metrics report whose keys are not exactly TRAINING_METRIC_KEYS, naming each missing and unknown key."""
    missing = sorted(TRAINING_METRIC_KEYS - metrics.keys())
    unknown = sorted(metrics.keys() - TRAINING_METRIC_KEYS)
    problems = [f"{label} {', '.join(keys)}" for label, keys in (("missing", missing), ("unknown", unknown)) if keys]
    if problems:
        raise InvalidArgument(
            "metrics",
            f"{'; '.join(problems)}: a training job reports exactly {', '.join(sorted(TRAINING_METRIC_KEYS))}",
        )
