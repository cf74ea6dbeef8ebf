"""Request dispatch through the handler registry (Kafka's KafkaApis, minus the 4,000 lines).

Each module in `server/apis/` registers its handlers with `@api(key, versions)` in
`server/api_registry.py`, a leaf module, so that the handlers need not import this one; this
module imports the `apis` package, which registers them all, and dispatches to them. The
versions advertised by ApiVersions are read from the same registry, so the broker never claims
a version it does not implement. The tests hold the advertised ranges to what Kafka 3.9.2
answered (`tests/kafka_api_versions.py` lists every difference with its reason).

A handler receives the broker's services and the decoded request and returns a plain-dict
response body (built into the negotiated version's kio type by `harness.wire`), None for "no
response" (acks=0 produce), or an awaitable of either.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from harness.wire import protocol
from harness.wire.produce_response import encode_produce_response
from harness.wire.protocol import ProtocolError, Request
from reference_broker.server import apis  # noqa: F401  (importing it registers every handler)
from reference_broker.server.api_registry import registry, supports
from reference_broker.server.apis.api_versions import unsupported_version_response

if TYPE_CHECKING:
    from reference_broker.network.socket_server import ConnectionInfo
    from reference_broker.server.broker_services import BrokerServices

# `registry` and `supports` are read from here too (ci/fuzz_target.py, ci/fuzz_broker.py,
# tests/test_readme.py): imported through this module, the registry is always complete.
__all__ = ["KafkaApis", "registry", "supports"]

log = logging.getLogger("reference_broker.server.kafka_apis")

PRODUCE_KEY = 0
# What a handler returns when it answers at once; anything else is checked for awaitability
# (inspect.isawaitable's ABC checks cost more than the rest of a small request's dispatch).
_PLAIN_RESULTS = (dict, type(None))


class KafkaApis:
    """Turns one frame into one encoded response, consulting the registry."""

    def __init__(self, services: BrokerServices) -> None:
        self._services = services
        self._handlers = registry()

    def handle_frame(
        self, frame: bytes, conn: ConnectionInfo
    ) -> bytes | list[Any] | None | Awaitable[bytes | list[Any] | None]:
        api_key, version, correlation_id = protocol.peek_header(frame)
        if api_key == protocol.API_VERSIONS_KEY and not supports(api_key, version):
            # KIP-511: answer an unknown ApiVersions version with v0 and our supported range.
            return protocol.encode_response(
                api_key, 0, correlation_id,
                unsupported_version_response(self._services.config.zookeeper_mode))
        request = protocol.decode_request(frame, supports)
        handler = self._handlers[api_key]
        if handler.zk_only and not self._services.config.zookeeper_mode:
            raise ProtocolError(f"{request.api_name} is served only in ZooKeeper mode")
        result = handler.handle(self._services, request, conn)
        if type(result) not in _PLAIN_RESULTS and inspect.isawaitable(result):
            return self._finish_async(request, result)
        return self._encode(request, result)

    async def _finish_async(
        self, request: Request, pending: Awaitable[Any]
    ) -> bytes | list[Any] | None:
        return self._encode(request, await pending)

    @staticmethod
    def _encode(request: Request, body: Any) -> bytes | list[Any] | None:
        """The response frame: bytes, or chunks when it carries file regions (zero-copy fetch)."""
        if body is None:
            return None
        try:
            if request.api_key == PRODUCE_KEY:
                # Once per produced batch: the hand-written writer (kio's bytes, tested so).
                frame = encode_produce_response(request.api_version, request.correlation_id,
                                                body)
                if frame is not None:
                    return frame
            chunks = protocol.encode_response_chunks(
                request.api_key, request.api_version, request.correlation_id, body
            )
        except Exception as exc:
            raise ProtocolError(
                f"could not encode {request.api_name} v{request.api_version} response: {exc}"
            ) from exc
        return chunks[0] if len(chunks) == 1 and isinstance(chunks[0], bytes) else chunks
