from stash_scorer.main import main

main()
