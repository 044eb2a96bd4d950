from stash_gepa.main import main

main()
