"""Helpers for ingest tests: a real IngestServicer on a real gRPC port, and payload builders."""

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import grpc
import orjson

from stash.rm.v1 import ingest_pb2, ingest_pb2_grpc
from stash_common.channels import open_channel
from stash_common.db import make_engine, make_sessions, upgrade
from stash_common.server import start
from stash_ingest.api import IngestServicer
from stash_ingest.imports import Titler
from stash_ingest.revisions import Announcer
from stash_ingest.store import MIGRATIONS_DIR

OWNER = "owner-a"
OTHER_OWNER = "owner-b"


def serve_ingest(
    database_url: str,
    titler: Titler,
    announcer: Announcer | None = None,
    settle: timedelta = timedelta(0),
    port: int = 0,
) -> tuple[Any, Callable[[], None]]:
    """A started ingest server (on `port`, any free one when 0) and a stub on it; returns (stub, stop)."""
    upgrade("ingest", MIGRATIONS_DIR, database_url)
    engine = make_engine(database_url)
    servicer = IngestServicer(make_sessions(engine), titler, announcer, settle)

    def register(server: grpc.Server) -> list[str]:
        ingest_pb2_grpc.add_IngestServiceServicer_to_server(servicer, server)
        return ["stash.rm.v1.IngestService"]

    running = start(register, "127.0.0.1", port)
    channel = open_channel(f"127.0.0.1:{running.port}")

    def stop() -> None:
        channel.close()
        running.stop(0)
        engine.dispose()

    return ingest_pb2_grpc.IngestServiceStub(channel), stop


def stash_line(external_id: str | None = None, **fields: Any) -> str:
    """One Stash Trace Format line: a small support conversation with a tool call."""
    trace: dict[str, Any] = {
        "steps": [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": "I want a refund for order 1182"},
            {
                "role": "assistant",
                "content": "",
                "tool_name": "lookup_order",
                "tool_input": {"order_id": "1182"},
                "tool_call_id": "call_1",
            },
            {
                "role": "tool",
                "content": '{"status": "delivered"}',
                "tool_name": "lookup_order",
                "tool_call_id": "call_1",
            },
            {"role": "assistant", "content": "Your order was delivered, so I have started a refund."},
        ],
        **fields,
    }
    if external_id is not None:
        trace["id"] = external_id
    return orjson.dumps(trace).decode()


def import_payload(stub: Any, data: str, fmt: str = "stash", owner: str = OWNER, **fields: Any) -> Any:
    """ImportTraces through the stub."""
    return stub.ImportTraces(
        ingest_pb2.ImportTracesRequest(owner_id=owner, format=fmt, data=data.encode(), **fields), timeout=60
    )


def trace_total(stub: Any, owner: str = OWNER) -> int:
    """How many listed traces the owner has."""
    return stub.ListTraces(ingest_pb2.ListTracesRequest(owner_id=owner), timeout=30).page_info.total
