from stash_common.entrypoint import run
from stash_gepa.main import main

run(main)
