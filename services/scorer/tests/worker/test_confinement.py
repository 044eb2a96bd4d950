"""The scorer service process: every module outside the worker imports without torch or transformers."""

from support.confinement import import_without


def test_service_modules_never_load_torch_or_transformers() -> None:
    # The worker package runs inside scoring jobs; __main__ serves.
    probe = import_without("stash_scorer", "stash_scorer.worker", "stash_scorer.__main__")

    assert {"stash_scorer.job_contract", "stash_scorer.main"} <= set(probe.imported)
    assert probe.heavy == []
