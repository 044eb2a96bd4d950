"""The scoring worker: `python -m stash_common.jobs.worker score <job_dir>`, the only scorer code that loads torch.

It reads a score job directory written by the scorer service (`stash_scorer.job_contract`), downloads
the reward model's checkpoint archive from object storage into a temporary directory, scores every
eligible action and every trace with the shared runtime (`stash_common.reward_model`: one forward pass
per trace for causal decoders, length-sorted batches otherwise; the traces of a chunk share their passes),
and reports each trace to `ScorerService.ReportScoringResult` as soon as its chunk is scored, so a batch
publishes trace by trace. It
never makes a score up: a trace it cannot score is reported failed, with the reason. Only `scoring.py`
imports torch; everything that can fail without a model is checked before it is imported.
"""
