from stash_gateway.main import main

main()
