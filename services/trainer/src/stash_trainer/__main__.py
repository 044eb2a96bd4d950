from stash_common.entrypoint import run
from stash_trainer.main import main

run(main)
