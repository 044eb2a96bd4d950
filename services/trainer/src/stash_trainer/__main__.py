from stash_trainer.main import main

main()
