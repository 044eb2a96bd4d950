"""One reader per instrumentation convention that records LLM calls on spans.

Each module knows one convention's attribute names and nothing else: where it records a call's
input and output messages (returned in the GenAI message shape of `otel.messages`, each with
where it was read), which spans it marks as not being LLM calls, and what it calls the span's
kind. Which convention wins when a span carries several is decided in one place, `otel.calls`.
"""
