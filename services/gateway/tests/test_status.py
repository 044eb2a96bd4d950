"""Which service a gRPC transport error is about, read from the addresses in its text."""

import pytest

from stash_common.settings import load
from stash_gateway.settings import GatewaySettings
from stash_gateway.status import unreachable_service

SETTINGS = load(GatewaySettings, ingest_address="127.0.0.1:50061", labeler_address="labeler:50062")


@pytest.mark.parametrize(
    ("details", "service"),
    [
        ("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:50061: Connection refused", "ingest"),
        ("DNS resolution failed for labeler:50062: C-ares status is not ARES_SUCCESS", "labeler"),
        (
            "failed to connect to all addresses; last error: UNKNOWN: ipv6:%5B::1%5D:50062: Connection refused",
            "labeler",
        ),
        ("Deadline Exceeded", None),
    ],
)
def test_the_service_is_named_by_its_address_or_port(details: str, service: str | None) -> None:
    assert unreachable_service(SETTINGS, details) == service
