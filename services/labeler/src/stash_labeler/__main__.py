from stash_labeler.main import main

main()
