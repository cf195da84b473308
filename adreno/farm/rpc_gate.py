"""The allow-list of an agent's RPC sessions: a client reaches only the functions a measurement needs.

How TVM's server resolves a client's function names (src/runtime/rpc/rpc_endpoint.cc, rpc_local_session.cc in
TVM 0.27): a client's `session.get_function(name)` is the syscall packet `kGetGlobalFunc` carrying the name;
the server answers with a handle to `Function::GetGlobal(name)`, i.e. ANY global of the process: every one TVM
registers (`ffi.ModuleWriteToFile` writes bytes anywhere, `ffi.ModuleLoadFromFile` loads any .so,
`s_tir.meta_schedule.remove_build_dir` deletes a directory), not just the `tvm.rpc.server.*` ones the agent
confines. A second way in is the session's first packet, `kInitServer`, whose arguments name a session
constructor that the server looks up the same way and calls with the client's arguments. Every other request
(`kCallFunc`, copies, device syscalls) acts on handles the client got back from one of those two.

Re-registering or removing globals in the session process cannot close this: TVM's own C++ looks its helpers up by
name too (a loaded library's loader `ffi.Module.load_from_file.so`, `device_api.opencl`, ...), so they must stay.
The gate sits on the wire instead: the session's server loop reads the socket through `RequestGate.recv`
(TVM's `rpc.ServerLoop(fsend, frecv)`), which reads each packet's header first and passes it on only when it is
a `kInitServer` without constructor arguments or a `kGetGlobalFunc` of a name in `ALLOWED`; any other such
packet is answered by the gate itself and never reaches TVM: a lookup as TVM answers a name no global has (to the
client the session has no other function: `AttributeError: ... has no function`; TVM's client probes optional
functions by name and expects exactly that answer), an init with an exception. Everything else streams through
(an upload's megabytes are not copied twice). The check is on the exact bytes of the name: a NUL, an unknown
encoding or a malformed packet is refused like an unknown name.

What the allow-list does not cover (docs/farm.md): a client that forges raw pointers as handles in `kCallFunc`
or in copies (TVM's protocol trusts the client with them), and anything a library it uploads and loads does.
"""

from __future__ import annotations

import socket
import struct

# What RPCRunner and a TVM-runtime measurement call (upload, load of an uploaded module, run, time, remove),
# each confined to the session's work directory by `adreno.farm.agent`.
ALLOWED = frozenset({
    "tvm.rpc.server.upload", "tvm.rpc.server.download", "tvm.rpc.server.remove", "tvm.rpc.server.load_module",
    "tvm.rpc.server.ModuleGetFunction", "runtime.RPCTimeEvaluator",
    "adreno.agent.hello", "adreno.agent.prepare", "adreno.agent.measure", "adreno.agent.export",
})

# TVM's RPC protocol (src/runtime/rpc/minrpc/rpc_reference.h): packet = u64 length, i32 code, body.
_INIT_SERVER, _RETURN, _EXCEPTION, _GET_GLOBAL_FUNC = 2, 4, 5, 9
_NONE, _RAW_STR, _SMALL_STR, _STR = 0, 8, 11, 65  # tvm-ffi type indices
_INSPECTED_MAX = 1 << 16  # an init or lookup packet is a few hundred bytes; a larger one is refused unread
_STREAM_CHUNK = 1 << 20


class Refused(Exception):
    """A packet the gate does not pass to TVM; its message goes back to the client."""


class RequestGate:
    """The byte stream between a client's socket and TVM's server loop, with the allow-list applied."""

    def __init__(self, sock: socket.socket, allowed: frozenset[str] = ALLOWED):
        self.sock, self.allowed = sock, allowed
        self.released = bytearray()  # bytes checked and due to TVM
        self.streaming = 0  # bytes of the current packet's body that go through unread

    def send(self, data) -> int:
        """TVM's `fsend`: its replies go to the client unchanged."""
        self.sock.sendall(bytes(data))
        return len(data)

    def recv(self, size: int) -> bytes:
        """TVM's `frecv`: at most `size` bytes, empty at the end of the stream (also after a client that hung up
        mid-packet or sent an oversized request: nothing of that packet reached TVM, so it sees a clean end)."""
        try:
            if not self.released and not self.streaming and not self._next_packet():
                return b""
        except (ConnectionError, OSError):
            return b""
        if self.released:
            chunk = bytes(self.released[:size])
            del self.released[:size]
            return chunk
        chunk = self.sock.recv(min(size, self.streaming, _STREAM_CHUNK))
        self.streaming -= len(chunk)
        return chunk

    def _next_packet(self) -> bool:
        """Read packets until one is passed (True) or the client hung up (False); refused ones are answered."""
        while True:
            head = self._read(8, allow_eof=True)
            if head is None:
                return False
            (length,) = struct.unpack("<Q", head)
            if length < 4:  # TVM skips an empty packet; a shorter one is TVM's to refuse
                self.released += head
                self.streaming = length
                return True
            code_bytes = self._read(4)
            (code,) = struct.unpack("<i", code_bytes)
            if code not in (_INIT_SERVER, _GET_GLOBAL_FUNC):
                self.released += head + code_bytes
                self.streaming = length - 4
                return True
            if length - 4 > _INSPECTED_MAX:
                self._reply_refusal(f"a request of {length} bytes where a few hundred are expected")
                return False  # its body is not read: the session ends
            body = self._read(length - 4)
            try:
                self.check(code, body)
            except Refused as err:
                if code == _GET_GLOBAL_FUNC:
                    self._reply_absent()
                else:
                    self._reply_refusal(str(err))
                continue
            self.released += head + code_bytes + body
            return True

    def check(self, code: int, body: bytes) -> None:
        """Refused unless `body` is an init without constructor arguments or a lookup of an allowed name."""
        if code == _INIT_SERVER:
            if len(body) < 8:
                raise Refused("malformed session init")
            (version_length,) = struct.unpack_from("<Q", body)
            if body[8 + version_length:] != struct.pack("<i", 0):
                raise Refused("a session constructor is not allowed: connect with no session_constructor_args")
            return
        name = _single_string(body)
        if name not in self.allowed:
            raise Refused(f"{name!r} is not on this agent's allow-list of RPC functions (docs/farm.md)")

    def _reply_absent(self) -> None:
        """What TVM answers a lookup of a name no global has: a null handle (TVM's client probes optional
        functions, `tvm.rpc.server.GetCRTMaxPacketSize`, expecting exactly that)."""
        body = struct.pack("<iii", _RETURN, 1, _NONE)
        self.sock.sendall(struct.pack("<Q", len(body)) + body)

    def _reply_refusal(self, why: str) -> None:
        message = f"adreno farm agent refused the request: {why}".encode()
        body = struct.pack("<iiiQ", _EXCEPTION, 1, _RAW_STR, len(message)) + message
        self.sock.sendall(struct.pack("<Q", len(body)) + body)

    def _read(self, n: int, allow_eof: bool = False) -> bytes | None:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                if allow_eof and not data:
                    return None
                raise ConnectionError("the client hung up in the middle of a packet")
            data += chunk
        return bytes(data)


def _single_string(body: bytes) -> str:
    """The one string argument of a `kGetGlobalFunc` body, in either encoding TVM sends; Refused otherwise."""
    try:
        count, type_index = struct.unpack_from("<ii", body)
        offset = 8
        if type_index in (_SMALL_STR, _STR):
            (inner,) = struct.unpack_from("<I", body, offset)
            if inner != _STR:
                raise Refused("malformed function name")
            offset += 4
        elif type_index != _RAW_STR:
            raise Refused("a function name that is not a string")
        (length,) = struct.unpack_from("<Q", body, offset)
        raw = body[offset + 8:]
    except struct.error:
        raise Refused("malformed function lookup") from None
    if count != 1 or len(raw) != length or b"\0" in raw:
        raise Refused("malformed function lookup")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("a function name that is not UTF-8") from None
