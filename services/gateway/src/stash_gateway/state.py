"""Typed access to what the app keeps in `app.state`: the services' stubs and the settings.

Starlette types `app.state` as a bag of `Any`. Routes take these dependencies instead, so each
stub call is checked against the generated request and response types, and each deadline is read
from GatewaySettings rather than written into the route.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from stash_gateway.peers import Peers
from stash_gateway.query.engine import QueryEngine
from stash_gateway.settings import GatewaySettings


def peers_of(request: Request) -> Peers:
    """The channels to the services behind the gateway, opened when the app started."""
    peers: Peers = request.app.state.peers
    return peers


def settings_of(request: Request) -> GatewaySettings:
    """The settings the app was created with."""
    settings: GatewaySettings = request.app.state.settings
    return settings


def query_engine_of(request: Request) -> QueryEngine:
    """The engine that runs SQL queries over each owner's loaded tables."""
    engine: QueryEngine = request.app.state.query_engine
    return engine


Services = Annotated[Peers, Depends(peers_of)]
Queries = Annotated[QueryEngine, Depends(query_engine_of)]
Settings = Annotated[GatewaySettings, Depends(settings_of)]
