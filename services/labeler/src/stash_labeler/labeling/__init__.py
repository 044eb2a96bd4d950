"""Labelers: what a step *is*, chunk by chunk.

`protocol` says what every labeler promises; `rules` labels from the trace alone (the default, and
the fallback when no model is configured); `llm` asks a language model. Each module is imported by
its full name: `llm` pulls in the OpenAI client, which a rule-only deployment never loads.
"""
