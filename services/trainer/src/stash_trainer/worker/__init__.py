"""The reward-model training worker: `python -m stash_common.jobs.worker train <job_dir>`.

It reads a job directory written by the trainer service (the spec's "Job directory contract"),
trains `AutoModelForSequenceClassification(num_labels=1)` with the Bradley–Terry loss, evaluates
on a seeded split by trace, and writes the checkpoint, its reward statistics, scores and
`result.json` back into the directory. Only `training.py` imports torch, with the runtime it shares
with the scorer's worker (`stash_common.reward_model`); the contract, the split, the batching plan
and the statistics are plain Python.
"""
