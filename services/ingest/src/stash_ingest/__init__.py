"""The ingest service: turns agent traces into canonical traces; owns traces, steps, spans, annotations."""
