"""What a request handler sees: the broker's services and the request's header."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkette.broker.protocol.messages.request_header import RequestHeader
from kafkette.broker.security.session import Session

if TYPE_CHECKING:
    from kafkette.broker.server.app import Broker


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    peer: str
    session: Session = field(default_factory=Session)

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id
