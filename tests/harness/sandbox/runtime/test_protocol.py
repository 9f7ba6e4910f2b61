from __future__ import annotations

import os
import socket
import struct
import time

import pytest

from harness.sandbox.runtime.protocol import DeadlineExceeded, PeerClosed, ProtocolError, recv_msg, send_msg


@pytest.fixture()
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_round_trip_with_file_descriptors(pair):
    a, b = pair
    r, w = os.pipe()
    send_msg(a, {"op": "x", "text": "é" * 10}, fds=(w,))
    msg, fds, _ = recv_msg(b, max_bytes=1000)
    assert msg == {"op": "x", "text": "é" * 10} and len(fds) == 1
    os.write(fds[0], b"hi")
    assert os.read(r, 2) == b"hi"
    for fd in (r, w, *fds):
        os.close(fd)


def test_large_message_round_trip(pair):
    a, b = pair
    import threading

    payload = {"data": "x" * 3_000_000}
    t = threading.Thread(target=send_msg, args=(a, payload))
    t.start()
    msg, _, _ = recv_msg(b, max_bytes=4_000_000)
    t.join()
    assert msg == payload


def test_oversized_frame_is_rejected(pair):
    a, b = pair
    a.sendall(struct.pack("!I", 10_000_000))
    with pytest.raises(ProtocolError, match="exceeds the cap"):
        recv_msg(b, max_bytes=1000)


@pytest.mark.parametrize("body", [b"\xff\xfe", b"[1, 2]", b"{not json"])
def test_garbage_is_a_protocol_error(pair, body):
    a, b = pair
    a.sendall(struct.pack("!I", len(body)) + body)
    with pytest.raises(ProtocolError):
        recv_msg(b, max_bytes=1000)


def test_eof_and_truncated_frames(pair):
    a, b = pair
    a.sendall(struct.pack("!I", 100) + b"{")
    a.close()
    with pytest.raises(ProtocolError, match="mid-frame"):
        recv_msg(b, max_bytes=1000)
    c, d = socket.socketpair()
    c.close()
    with pytest.raises(PeerClosed):
        recv_msg(d, max_bytes=1000)
    d.close()


def test_deadline(pair):
    _, b = pair
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        recv_msg(b, max_bytes=1000, deadline=time.monotonic() + 0.1)
    assert time.monotonic() - start < 2


def test_sender_pid_from_credentials(pair):
    a, b = pair
    b.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    send_msg(a, {"op": "hello"})
    _, _, pid = recv_msg(b, max_bytes=1000, want_creds=True)
    assert pid == os.getpid()


def test_lone_surrogates_travel_as_their_escape_text_both_ways(pair):
    a, b = pair
    text = b"caf\xe9".decode("utf-8", "surrogateescape")
    send_msg(a, {text: [text, "plain \\udce9"]})  # would not encode as UTF-8
    msg, _, _ = recv_msg(b, max_bytes=1000)
    assert msg == {"caf\\udce9": ["caf\\udce9", "plain \\udce9"]}
    body = b'{"k":"\\ud800x"}'  # a hand-made frame whose JSON escape decodes to a lone surrogate
    a.sendall(struct.pack("!I", len(body)) + body)
    msg, _, _ = recv_msg(b, max_bytes=1000)
    assert msg == {"k": "\\ud800x"} and msg["k"].encode("utf-8")
