"""Whether an address holds a Ray cluster, answered within seconds: :func:`cluster_problem`.

``ray.init`` to an address that accepts TCP but is no Ray GCS (the cluster's control service) retries for
minutes. This module asks the address itself, without importing Ray: a TCP connection (:func:`reachable`,
which the preflight also uses for download hosts), then one gRPC call in the GCS's own protocol
(:func:`ray_gcs_problem`). docs/design.md ("The Ray probe") describes the exchange.
"""

from __future__ import annotations

import os
import socket
import time
from typing import NamedTuple

#: Seconds to wait for a TCP connection (a Ray cluster, a download host) before calling it unreachable.
CONNECT_TIMEOUT = 3.0

#: The call the Ray handshake makes: the GCS (the cluster's control service, at the address ``ray start --head``
#: prints) answers it first to every client, before any other call. Its request message is empty.
GCS_PROBE_METHOD = "/ray.rpc.NodeInfoGcsService/GetClusterId"

#: What an HTTP/2 client sends first (RFC 9113, 3.4).
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: HTTP/2 frame types (RFC 9113, 6).
_DATA, _HEADERS, _RST_STREAM, _SETTINGS, _PING, _GOAWAY = 0, 1, 3, 4, 6, 7
#: HTTP/2 frame flags: ACK (SETTINGS, PING) and END_STREAM (DATA, HEADERS) are both bit 0.
_ACK = _END_STREAM = 1
_END_HEADERS, _PADDED = 4, 8
#: The stream of the one call.
_CALL_STREAM = 1
#: The largest frame the probe reads (anything larger is no GCS reply).
_MAX_FRAME = 1 << 20
#: The bytes of a frame's header: length (3), type, flags, stream (4).
_FRAME_HEADER = 9


def reachable(host: str, port: int, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """None if a TCP connection to ``host:port`` opens within ``timeout`` seconds, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as error:
        return str(error) or type(error).__name__
    except (UnicodeError, ValueError) as error:  # an invalid host name
        return str(error)


def cluster_problem(address: str) -> str | None:
    """Why ``address`` (``HOST:PORT``) is no Ray cluster to connect to, or None: it must accept a connection
    (:func:`reachable`) and answer a GCS call (:func:`ray_gcs_problem`), each within :data:`CONNECT_TIMEOUT`."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return f"Ray address {address!r} must be HOST:PORT (e.g. 10.0.0.1:6379)"
    why = reachable(host, int(port), CONNECT_TIMEOUT)
    if why is not None:
        return (
            f"cannot reach the Ray cluster at {address} within {CONNECT_TIMEOUT:g} s ({why}); "
            "start it with `ray start --head --port=PORT`, or choose another executor"
        )
    why = ray_gcs_problem(host, int(port), CONNECT_TIMEOUT)
    if why is not None:
        return (
            f"{address} accepts connections but is not a Ray cluster ({why}); give the address "
            "`ray start --head` printed (its GCS port, default 6379), or choose another executor"
        )
    return None


class _NotAGcs(Exception):
    """What the server answered instead of a GCS reply (the message says it)."""


class _Frame(NamedTuple):
    kind: int
    flags: int
    stream: int
    payload: bytes


def ray_gcs_problem(host: str, port: int, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """None if ``host:port`` answers the Ray GCS call :data:`GCS_PROBE_METHOD` within ``timeout`` seconds,
    else why not (not HTTP/2, an HTTP/2 error, a gRPC status without a reply, silence). Clusters with TLS
    (``RAY_USE_TLS``) are not probed (None)."""
    if os.environ.get("RAY_USE_TLS", "").lower() in ("1", "true"):
        return None
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as connection:
            connection.sendall(_cluster_id_request(host, port))
            _await_reply(connection, deadline)
            return None
    except _NotAGcs as answer:
        return str(answer)
    except TimeoutError:
        return f"no answer to a gRPC call within {timeout:g} s"
    except OSError as error:
        return str(error) or type(error).__name__


def _cluster_id_request(host: str, port: int) -> bytes:
    """The client preface, a SETTINGS frame, and the unary call :data:`GCS_PROBE_METHOD` with an empty message."""
    headers = (
        b"\x83\x86"  # :method POST, :scheme http (HPACK static table entries 3 and 6)
        + _hpack_literal(4, GCS_PROBE_METHOD)
        + _hpack_literal(1, f"{host}:{port}")  # :path, :authority
        + _hpack_literal(31, "application/grpc")
        + b"\x00\x02te\x08trailers"
    )  # content-type, te
    empty_message = b"\x00\x00\x00\x00\x00"  # gRPC: not compressed, length 0
    return (
        _PREFACE
        + _h2_frame(_SETTINGS, 0, 0)
        + _h2_frame(_HEADERS, flags=_END_HEADERS, stream=_CALL_STREAM, payload=headers)
        + _h2_frame(_DATA, flags=_END_STREAM, stream=_CALL_STREAM, payload=empty_message)
    )


def _await_reply(connection: socket.socket, deadline: float) -> None:
    """Read frames until the call's reply arrives; :class:`_NotAGcs` where the server shows it is no GCS,
    ``socket.timeout`` at ``deadline``."""
    received, first = b"", True
    while True:
        frame, received = _next_frame(connection, received=received, deadline=deadline, first=first)
        first = False
        if _is_reply(connection, frame):
            return


def _next_frame(connection: socket.socket, *, received: bytes, deadline: float, first: bool) -> tuple[_Frame, bytes]:
    """The next whole frame and the bytes after it, receiving more until ``received`` holds one."""
    while len(received) < _FRAME_HEADER or len(received) < _FRAME_HEADER + _frame_length(received):
        if len(received) >= _FRAME_HEADER and _frame_length(received) > _MAX_FRAME:
            raise _NotAGcs("it answered with an oversized HTTP/2 frame")
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        connection.settimeout(left)
        chunk = connection.recv(65536)
        if not chunk:
            raise _NotAGcs(
                "it closed the connection"
                + (f" after answering {received[:24]!r}" if received else "")
                + " instead of answering a gRPC call"
            )
        received += chunk
        if first and len(received) >= _FRAME_HEADER and received[3] != _SETTINGS:  # a server opens with SETTINGS
            raise _NotAGcs(f"it answered {received[:24]!r}, not HTTP/2 (gRPC)")
    end = _FRAME_HEADER + _frame_length(received)
    frame = _Frame(
        kind=received[3],
        flags=received[4],
        stream=int.from_bytes(received[5:9], "big") & 0x7FFFFFFF,
        payload=received[_FRAME_HEADER:end],
    )
    return frame, received[end:]


def _frame_length(received: bytes) -> int:
    return int.from_bytes(received[:3], "big")


def _is_reply(connection: socket.socket, frame: _Frame) -> bool:
    """Whether ``frame`` is the call's gRPC reply; acknowledges the server's SETTINGS and PINGs (False), and
    raises :class:`_NotAGcs` on a frame that shows the server is no GCS."""
    if frame.kind in (_SETTINGS, _PING) and not frame.flags & _ACK:
        echo = frame.payload if frame.kind == _PING else b""  # a PING is answered with its own payload
        connection.sendall(_h2_frame(frame.kind, flags=_ACK, stream=0, payload=echo))
        return False
    if frame.kind == _GOAWAY:
        raise _NotAGcs("it speaks HTTP/2 but ended the connection (GOAWAY) instead of answering a gRPC call")
    if frame.stream != _CALL_STREAM:
        return False
    if frame.kind == _RST_STREAM:
        raise _NotAGcs("it speaks HTTP/2 but reset the call (RST_STREAM): not a Ray GCS")
    if frame.kind == _DATA:
        if _is_grpc_message(_unpadded(frame)):
            return True
        raise _NotAGcs("it answered the call with data that is not a gRPC message")
    if frame.kind == _HEADERS and frame.flags & _END_STREAM:
        raise _NotAGcs(
            "it speaks gRPC but has no Ray GCS service (it answered the cluster-id call with a "
            "status and no reply: another gRPC server, e.g. a Ray client port?)"
        )
    return False


def _unpadded(frame: _Frame) -> bytes:
    """A DATA frame's data without its padding (the PADDED flag: a pad length byte first, that many bytes last)."""
    payload = frame.payload
    return payload[1 + payload[0] : len(payload) - payload[0]] if frame.flags & _PADDED else payload


def _is_grpc_message(data: bytes) -> bool:
    """Whether ``data`` is one length-prefixed gRPC message: a compressed flag (0 or 1), a 4-byte length, then
    the message."""
    return len(data) >= 5 and data[0] in (0, 1) and int.from_bytes(data[1:5], "big") == len(data) - 5


def _h2_frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    """An HTTP/2 frame: its 9-byte header, then ``payload``."""
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _hpack_integer(value: int, prefix_bits: int) -> bytes:
    """HPACK's integer with an N-bit prefix (RFC 7541, 5.1), the other bits of the first byte zero."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([value])
    out, value = [limit], value - limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    return bytes(out + [value])


def _hpack_literal(index: int, value: str) -> bytes:
    """A header field "literal without indexing" whose name is entry ``index`` of HPACK's static table."""
    data = value.encode()
    return _hpack_integer(index, 4) + _hpack_integer(len(data), 7) + data
