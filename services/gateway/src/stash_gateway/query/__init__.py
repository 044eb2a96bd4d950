"""SQL over the caller's own data: `POST /api/v1/rm/query` runs one read-only SELECT in DuckDB.

Each owner gets an in-memory DuckDB holding only their rows, streamed from the services that own them
(`loading`), locked down before any query runs and kept warm until one of those services reports that
the owner's rows changed (`cache`). A statement is checked with DuckDB's own parser first
(`statements`), runs under a time limit that interrupts it (`database`), and its rows come back as JSON
(`results`). `engine` puts these together; `routes/query.py` is the HTTP edge. The gateway starts with
`limits` and `engine` alone: DuckDB and pyarrow load with the first query.
"""
