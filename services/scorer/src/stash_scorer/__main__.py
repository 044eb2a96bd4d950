from stash_common.entrypoint import run
from stash_scorer.main import main

run(main)
