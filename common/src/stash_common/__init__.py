"""Code every Stash RM service shares: settings, errors, database, storage, coordination, gRPC, logging."""
