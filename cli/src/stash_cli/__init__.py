"""The `stash-rm` command line: run services, the local stack, accounts and the main job."""
