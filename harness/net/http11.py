"""Just enough HTTP/1.1 server side for a JSON API: read one request, write one response.

The Toxiproxy API is a handful of small JSON requests from local clients (toxiproxy-python
goes through ``requests``, the CLI and curl too), so a strict little parser over asyncio
streams is simpler than a web framework and adds no dependency. It understands
``Content-Length`` and chunked bodies, ``Expect: 100-continue`` (curl sends it for larger
bodies) and persistent connections; anything else malformed is a 400 that closes only that
connection.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import unquote

MAX_LINE = 8 * 1024
MAX_HEADERS = 100
MAX_BODY = 1024 * 1024


class HttpError(Exception):
    """The request cannot be understood; answered with ``status`` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Request:
    method: str
    target: str
    version: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def segments(self) -> list[str]:
        """The path split on ``/`` with each part percent-decoded; the query is ignored."""
        path = self.target.split("?", 1)[0]
        return [unquote(part) for part in path.strip("/").split("/")] if path.strip("/") else []

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return connection == "keep-alive"
        return connection != "close"


async def _line(reader: asyncio.StreamReader) -> bytes:
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise HttpError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "line too long") from None
    except asyncio.IncompleteReadError as error:
        if error.partial:
            raise HttpError(HTTPStatus.BAD_REQUEST, "connection closed mid-request") from None
        raise
    if len(line) > MAX_LINE:
        raise HttpError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "line too long")
    return line.rstrip(b"\r\n")


async def read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> Request | None:
    """The next request on the connection, or ``None`` if the client closed between requests."""
    try:
        start = await _line(reader)
        while not start:
            start = await _line(reader)
    except asyncio.IncompleteReadError:
        return None
    parts = start.decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(HTTPStatus.BAD_REQUEST, "malformed request line")
    request = Request(method=parts[0], target=parts[1], version=parts[2])
    try:
        await _read_headers(reader, request)
        await _read_body(reader, writer, request)
    except asyncio.IncompleteReadError:
        raise HttpError(HTTPStatus.BAD_REQUEST, "connection closed mid-request") from None
    return request


async def _read_headers(reader: asyncio.StreamReader, request: Request) -> None:
    for _ in range(MAX_HEADERS + 1):
        line = await _line(reader)
        if not line:
            return
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep or not name or name != name.strip():
            raise HttpError(HTTPStatus.BAD_REQUEST, "malformed header")
        request.headers[name.lower()] = value.strip()
    raise HttpError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "too many headers")


async def _read_body(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    if request.headers.get("transfer-encoding", "").lower() == "chunked":
        await _send_continue(writer, request)
        request.body = await _read_chunked(reader)
        return
    length_text = request.headers.get("content-length")
    if length_text is None:
        return
    if not length_text.isdigit():
        raise HttpError(HTTPStatus.BAD_REQUEST, "bad Content-Length")
    if int(length_text) > MAX_BODY:
        raise HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "body too large")
    await _send_continue(writer, request)
    request.body = await reader.readexactly(int(length_text))


async def _send_continue(writer: asyncio.StreamWriter, request: Request) -> None:
    if request.headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_text = (await _line(reader)).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise HttpError(HTTPStatus.BAD_REQUEST, "bad chunk size") from None
        if size == 0:
            while await _line(reader):
                pass
            return bytes(body)
        if len(body) + size > MAX_BODY:
            raise HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "body too large")
        body += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise HttpError(HTTPStatus.BAD_REQUEST, "bad chunk terminator")


def encode_response(
    status: int, body: bytes, content_type: str | None, *, keep_alive: bool
) -> bytes:
    """Status line, headers and body; every response carries a length, so no chunking."""
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    if status != HTTPStatus.NO_CONTENT:
        lines.append(f"Content-Length: {len(body)}")
    if not keep_alive:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
