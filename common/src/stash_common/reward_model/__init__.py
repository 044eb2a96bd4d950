"""The torch runtime of reward models, shared by the trainer's and the scorer's workers.

Loading a sequence-classification checkpoint, the device, tokenisation, batching, the reward
statistics and the scoring strategies live here once, so a model scores the same text the same way
whichever worker runs it. Only the worker packages import this subpackage (an import-linter
contract), and its modules import torch at the top: the services, the gateway and the CLI never load
it. `stats`, `packaged` and `passes` are the exceptions, plain Python, so a worker can validate a job
before it pays for importing torch, and the one-pass rule is testable without a model.
"""
