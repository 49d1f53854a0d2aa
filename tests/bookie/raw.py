"""A blocking raw socket that speaks bookie frames by hand, for tests of the server on the wire."""

from __future__ import annotations

import socket
import struct
import time

from bookie.protocol import FLAG_REPLY, Frame, FrameDecoder, encode_frame

WAIT_S = 10.0


class Raw:
    """A blocking socket speaking frames by hand; every read is bounded by WAIT_S."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        self.decoder = FrameDecoder()
        self.frames: list[Frame] = []

    def send(self, data: bytes | list[bytes]) -> None:
        self.sock.sendall(data if isinstance(data, bytes) else b"".join(data))

    def recv(self, count: int = 1) -> list[Frame]:
        deadline = time.monotonic() + WAIT_S
        while len(self.frames) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"got {len(self.frames)} of {count} replies")
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError(f"closed after {len(self.frames)} of {count} replies")
            self.frames += self.decoder.feed(data)
        out, self.frames = self.frames[:count], self.frames[count:]
        return out

    def call(self, op: int, body: bytes = b"", request_id: int = 1) -> tuple[int, bytes]:
        self.send(encode_frame(op, 0, request_id, body))
        (frame,) = self.recv()
        assert frame[2] == request_id and frame[1] & FLAG_REPLY
        (code,) = struct.unpack_from("<H", frame[3])
        return code, frame[3][2:]

    def closed_by_peer(self) -> bool:
        """Reads until EOF (True) or WAIT_S passes (False), dropping any data."""
        deadline = time.monotonic() + WAIT_S
        try:
            while time.monotonic() < deadline:
                if not self.sock.recv(1 << 16):
                    return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
        return False

    def close(self) -> None:
        self.sock.close()
