"""A local HTTP server speaking the Anthropic Messages and OpenAI Chat Completions wire formats.

Paid LLM providers are unreachable from tests, so the real `anthropic`, `openai` and `litellm`
clients talk to this server instead (base URL = `FakeLLM.url`). Tests decide what it answers
with `reply` (a function of the request body) and read back every request it received. An OpenAI
request with `logprobs: true` gets the first token's `top_logprobs` from `logprobs`, when set.
`fail_status` fails every request, `status_of` chosen ones (a status, or None to answer), and
`delay_s` holds each answer back (a provider's latency). An Anthropic request that forces a tool
(`tool_choice: {type: tool}`) gets that tool's call, with the reply as its input, when the reply is
a JSON object; any other reply stays text.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[str, dict[str, Any]], str]
# The error status to answer one request with, or None to answer it.
StatusResponder = Callable[[str, dict[str, Any]], int | None]
# Token → probability of the first output token's alternatives, or None for a response without logprobs.
LogprobResponder = Callable[[str, dict[str, Any]], dict[str, float] | None]


class _QuietServer(ThreadingHTTPServer):
    """A client closing a kept-alive connection is how such a connection ends, and one that gave up before the
    answer (a test of a provider's latency) is what that test wants: neither is an error to print."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError):
            super().handle_error(request, client_address)


class FakeLLM:
    """Answers `POST /v1/messages` (Anthropic) and `POST /v1/chat/completions` (OpenAI)."""

    def __init__(self, keep_alive: bool = False) -> None:
        self.keep_alive = keep_alive  # HTTP/1.1 connections stay open between requests, as real providers' do
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.reply: Responder = lambda _path, _body: "ok"
        self.fail_status: int | None = None
        self.status_of: StatusResponder | None = None
        self.delay_s = 0.0
        self.logprobs: LogprobResponder | None = None
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The server's base URL (OpenAI clients add `/v1` themselves only if given it)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeLLM:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON body for one request."""
        self.requests.append((path, body))
        time.sleep(self.delay_s)
        status = self.fail_status if self.fail_status is not None else self.status_of and self.status_of(path, body)
        if status:
            return status, {"type": "error", "error": {"type": "api_error", "message": "injected failure"}}
        text = self.reply(path, body)
        if path.endswith("/messages"):
            return 200, _anthropic_message(body.get("model", "fake"), text, _forced_tool(body))
        if path.endswith("/chat/completions"):
            alternatives = self.logprobs(path, body) if self.logprobs is not None and body.get("logprobs") else None
            logprobs = (
                _openai_logprobs(text, alternatives, body.get("top_logprobs") or 0)
                if alternatives is not None
                else None
            )
            return 200, _openai_completion(body.get("model", "fake"), text, logprobs)
        return 404, {"error": {"message": f"no such endpoint {path}"}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if fake.keep_alive else "HTTP/1.0"

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                status, payload = fake.answer(self.path, body)
                encoded = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(encoded)))
                self.end_headers()
                self.wfile.write(encoded)

            def log_message(self, *_args: Any) -> None:
                pass

        return Handler


def _forced_tool(body: dict[str, Any]) -> str | None:
    choice = body.get("tool_choice") or {}
    return choice.get("name") if choice.get("type") == "tool" else None


def _anthropic_message(model: str, text: str, tool: str | None = None) -> dict[str, Any]:
    """A text answer; for a forced tool whose reply is a JSON object, that tool's call with it as input."""
    try:
        tool_input = json.loads(text) if tool else None
    except ValueError:
        tool_input = None
    if isinstance(tool_input, dict):
        content = [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": tool, "input": tool_input}]
    else:
        content = [{"type": "text", "text": text}]
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if isinstance(tool_input, dict) else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": max(1, len(text) // 4)},
    }


def _openai_completion(model: str, text: str, logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": max(1, len(text) // 4), "total_tokens": 20},
    }


def _openai_logprobs(text: str, alternatives: dict[str, float], top: int) -> dict[str, Any]:
    ranked = sorted(((token, p) for token, p in alternatives.items() if p > 0), key=lambda item: -item[1])[:top]
    chosen = alternatives.get(text, 0.0)
    return {
        "content": [
            {
                **_token_logprob(text, chosen if chosen > 0 else 1.0),
                "top_logprobs": [_token_logprob(token, p) for token, p in ranked],
            }
        ],
        "refusal": None,
    }


def _token_logprob(token: str, probability: float) -> dict[str, Any]:
    return {"token": token, "logprob": math.log(probability), "bytes": list(token.encode())}
