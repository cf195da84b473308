"""The path a phone's RPC server takes to the tracker, adding the farm's token to its registration.

A phone runs TVM's own C++ `tvm_rpc`, which reports an address to the tracker only if it is an IP address
(`--custom-addr` is checked with `ValidateIP`): it cannot carry the farm's token (`adreno.farm.token`). So
`adreno farm android` points each phone's `adb reverse` at this relay instead of the tracker: the relay passes the
phone's tracker connection through, and in the phone-to-tracker direction rewrites the two messages that register
a server (`PUT`, and `UPDATE_INFO` of a `server:` key) to carry the token; everything else, and the whole
tracker-to-phone direction, goes through unchanged. The token never reaches the phone. The relay listens on
127.0.0.1 only (the phones reach it through adb's reverse forward).
"""

from __future__ import annotations

import json
import socket
import struct
import threading

from .common import FarmError
from .token import with_token

_FRAME_MAX = 1 << 20  # a tracker message is a short JSON list


class RegistrationRelay:
    """Listens on 127.0.0.1 (an ephemeral port: `port`) and relays each connection to `tracker` with `token`."""

    def __init__(self, tracker: tuple[str, int], token: str):
        self.tracker, self.token = tracker, token
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name="adreno-relay", daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                phone, _ = self._listener.accept()
            except OSError:
                return
            try:
                tracker = socket.create_connection(self.tracker, timeout=10)
                tracker.settimeout(None)
            except OSError:
                phone.close()
                continue
            threading.Thread(target=self._upstream, args=(phone, tracker), daemon=True).start()
            threading.Thread(target=_pipe, args=(tracker, phone), daemon=True).start()

    def _upstream(self, phone: socket.socket, tracker: socket.socket) -> None:
        """Phone to tracker: the 4-byte magic, then length-prefixed JSON messages, registrations given the token."""
        try:
            tracker.sendall(_read(phone, 4))
            while True:
                (length,) = struct.unpack("<i", _read(phone, 4))
                if not 0 <= length <= _FRAME_MAX:
                    raise FarmError(f"a tracker message of {length} bytes")
                body = self.with_token(_read(phone, length))
                tracker.sendall(struct.pack("<i", len(body)) + body)
        except (OSError, FarmError):
            pass
        finally:
            for sock in (phone, tracker):
                _close(sock)

    def with_token(self, body: bytes) -> bytes:
        """A tracker message from a phone, with the token added to the address a registration reports."""
        from tvm.rpc.base import TrackerCode

        try:
            message = json.loads(body)
        except ValueError:
            return body
        if not isinstance(message, list) or not message:
            return body
        if message[0] == TrackerCode.PUT and len(message) >= 3:
            reported = message[3] if len(message) > 3 else None
            message = [*message[:3], with_token(reported, self.token), *message[4:]]
        elif message[0] == TrackerCode.UPDATE_INFO and len(message) > 1 and isinstance(message[1], dict) \
                and str(message[1].get("key", "")).startswith("server:") and isinstance(message[1].get("addr"), list):
            info = message[1]
            message = [message[0], {**info, "addr": [with_token(info["addr"][0], self.token), *info["addr"][1:]]},
                       *message[2:]]
        else:
            return body
        return json.dumps(message).encode()


def _read(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return bytes(data)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(1 << 16):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            _close(sock)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
