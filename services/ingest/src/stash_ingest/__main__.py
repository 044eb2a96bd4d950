from stash_common.entrypoint import run
from stash_ingest.main import main

run(main)
