from stash_common.entrypoint import run
from stash_labeler.main import main

run(main)
