"""Length-prefixed JSON messages over unix stream sockets, with optional file descriptors (SCM_RIGHTS).

Frame: a 4-byte big-endian length, then that many bytes of UTF-8 JSON encoding one object (a dict). File
descriptors travel as ancillary data on the first byte of the frame. Everything read from a kernel is untrusted:
:func:`recv_msg` enforces a size cap and a deadline, and raises :class:`ProtocolError` for anything malformed, so
the caller can treat garbage exactly like a crashed peer.

Text is always valid UTF-8 on the wire: a lone surrogate in a string (``surrogateescape`` output of user code, a
``\\udc..`` escape in a hand-made frame) is sent and received as its escape text (``\\udce9``, as
``errors="backslashreplace"`` writes it), so no output of user code can make a frame unencodable.
"""

from __future__ import annotations

import array
import codecs
import json
import os
import re
import socket
import struct
import time
from typing import Any

HEADER = struct.Struct("!I")
MAX_FDS = 64
_CREDS = struct.Struct("iII")  # struct ucred: pid, uid, gid
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # a JSON escape that may decode to a lone surrogate


def _escape_in_json(exc: UnicodeError) -> tuple[str, int]:
    """Encoding error handler for JSON text: a lone surrogate (only ever inside a string literal) becomes the JSON
    for a backslash followed by ``uXXXX``, so the peer reads the same escape text that ``backslashreplace`` gives."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "".join(f"\\\\u{ord(c):04x}" for c in exc.object[exc.start : exc.end]), exc.end


codecs.register_error("stateguard-json-escape", _escape_in_json)


def without_surrogates(obj: Any) -> Any:
    """``obj`` (decoded JSON) with every lone surrogate in its strings and keys replaced by its escape text."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            return obj.encode("utf-8", "backslashreplace").decode("utf-8")
        return obj
    if isinstance(obj, list):
        return [without_surrogates(v) for v in obj]
    if isinstance(obj, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in obj.items()}
    return obj


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed frame (or closed the channel mid-frame)."""


class PeerClosed(ProtocolError):
    """The peer closed the channel (EOF) before a frame started: it exited or was killed."""


class DeadlineExceeded(ProtocolError):
    """No complete frame arrived before the deadline."""


def send_msg(sock: socket.socket, obj: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
    """Send one frame; ``fds`` ride along as SCM_RIGHTS ancillary data."""
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8", "stateguard-json-escape"
    )
    data = HEADER.pack(len(body)) + body
    if fds:
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        sent = sock.sendmsg([data], ancillary)
        if sent < len(data):
            sock.sendall(data[sent:])
    else:
        sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        _set_timeout(sock, deadline)
        try:
            chunk = sock.recv(min(remaining, 1 << 20))
        except (TimeoutError, socket.timeout) as exc:  # noqa: UP041 - socket.timeout kept for clarity
            raise DeadlineExceeded(f"frame incomplete after deadline ({n - remaining}/{n} bytes)") from exc
        except OSError as exc:
            raise ProtocolError(f"channel error: {exc}") from exc
        if not chunk:
            raise ProtocolError(f"peer closed the channel mid-frame ({n - remaining}/{n} bytes)")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _set_timeout(sock: socket.socket, deadline: float | None) -> None:
    if deadline is None:
        sock.settimeout(None)
    else:
        sock.settimeout(max(deadline - time.monotonic(), 1e-3))


def recv_msg(
    sock: socket.socket,
    *,
    max_bytes: int,
    deadline: float | None = None,
    want_creds: bool = False,
) -> tuple[dict[str, Any], list[int], int | None]:
    """Receive one frame: ``(message, fds, sender_pid)``.

    ``sender_pid`` is the sender's pid *as seen by the receiver* (kernel-translated SCM_CREDENTIALS); it is only
    filled when ``want_creds`` is true and ``SO_PASSCRED`` is enabled on ``sock``. Received fds are owned by the
    caller (they are closed here only when the frame turns out to be invalid).
    """
    _set_timeout(sock, deadline)
    anc_size = socket.CMSG_SPACE(MAX_FDS * 4) + (socket.CMSG_SPACE(_CREDS.size) if want_creds else 0)
    try:
        head, ancillary, flags, _ = sock.recvmsg(HEADER.size, anc_size)
    except (TimeoutError, socket.timeout) as exc:  # noqa: UP041
        raise DeadlineExceeded("no reply before the deadline") from exc
    except OSError as exc:
        raise ProtocolError(f"channel error: {exc}") from exc
    fds: list[int] = []
    pid: int | None = None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            arr = array.array("i")
            arr.frombytes(data[: len(data) - (len(data) % arr.itemsize)])
            fds.extend(arr)
        elif level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= _CREDS.size:
            pid = _CREDS.unpack(data[: _CREDS.size])[0]
    try:
        if not head:
            raise PeerClosed("peer closed the channel")
        if flags & socket.MSG_CTRUNC:
            raise ProtocolError("too many file descriptors in one frame")
        if len(head) < HEADER.size:
            head += _recv_exact(sock, HEADER.size - len(head), deadline)
        (length,) = HEADER.unpack(head)
        if length > max_bytes:
            raise ProtocolError(f"frame of {length} bytes exceeds the cap of {max_bytes} bytes")
        body = _recv_exact(sock, length, deadline)
        try:
            obj = json.loads(body.decode("utf-8"))
            if _SURROGATE_ESCAPE.search(body):
                obj = without_surrogates(obj)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ProtocolError(f"frame is not valid UTF-8 JSON: {exc}") from exc
        except RecursionError as exc:
            raise ProtocolError("frame nests too deeply") from exc
        if not isinstance(obj, dict):
            raise ProtocolError(f"frame is a JSON {type(obj).__name__}, expected an object")
    except ProtocolError:
        for fd in fds:
            os.close(fd)
        raise
    return obj, fds, pid
