"""The GEPA worker (`python -m stash_common.jobs.worker gepa <job_dir>`).

It is the only gepa code that loads gepa, LiteLLM and torch.

It reads a GEPA job directory written by the gepa service (`stash_gepa.job_contract`), downloads the
reward model's checkpoint from object storage into a temporary directory, has the reflection model
name the skill, and runs `gepa.optimize` with `SkillAdapter`: the task model answers each example
with the candidate skill, the reward model scores the replies, the reflection model proposes new
skill bodies. It writes `progress.json` as the budget is spent and `result.json` when it ends.
"""
