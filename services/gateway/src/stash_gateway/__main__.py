from stash_common.entrypoint import run
from stash_gateway.main import main

run(main)
