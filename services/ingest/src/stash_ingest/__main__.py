from stash_ingest.main import main

main()
