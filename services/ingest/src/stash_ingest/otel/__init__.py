"""OpenTelemetry traces of LLM calls, in the pieces that the `otel` import adapter and the live OTLP
receiver share.

Both paths turn OTLP into the same canonical trace, so neither owns the rules: the adapter
(`adapters/otel.py`) reads a file into span dicts and the receiver (`otlp.py`) stores span dicts and
rebuilds from them, and both call `traces.build_trace`. The pieces, in the order data flows:

- decoding: `values` (OTLP/JSON ids, times, AnyValue), `documents` (OTLP/JSON documents and
  Collector file-exporter lines → span dicts), `protobuf` (ExportTraceServiceRequest → span dicts),
  `spans` (span dicts → read-only views);
- `conventions/`: one reader per instrumentation convention (GenAI semantic conventions,
  OpenInference, OpenLLMetry), each giving messages in the GenAI message shape, which `messages`
  turns into steps;
- `calls`: which spans are LLM calls, and which convention's messages win;
- `history`: the merge rule that makes one conversation of a trace's LLM calls;
- `traces`: the canonical trace (steps, metadata, spans) of one trace id.
"""
