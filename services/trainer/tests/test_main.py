"""The trainer service process: every module outside the worker imports without torch or transformers."""

from support.confinement import import_without


def test_service_modules_never_load_torch_or_transformers() -> None:
    # The worker package runs inside training jobs; __main__ serves.
    probe = import_without("stash_trainer", "stash_trainer.worker", "stash_trainer.__main__")

    assert {"stash_trainer.api", "stash_trainer.pairs.feedback"} <= set(probe.imported)
    assert probe.heavy == []
