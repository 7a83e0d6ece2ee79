"""A minimal MongoDB wire-protocol client over a raw socket.

Drivers refuse to send malformed frames and hide which opcode and compressor a reply
used. These helpers build OP_MSG, OP_QUERY and OP_COMPRESSED frames byte by byte (or
let a test break them on purpose) and read replies back, so tests can check framing,
compression negotiation and the server's handling of bad input.
"""

from __future__ import annotations

import itertools
import socket
import struct
import zlib
from dataclasses import dataclass

import bson
import snappy
from backports import zstd

OP_REPLY = 1
OP_QUERY = 2004
OP_COMPRESSED = 2012
OP_MSG = 2013

HEADER = struct.Struct("<iiii")  # messageLength, requestID, responseTo, opCode
COMPRESSOR_IDS = {"noop": 0, "snappy": 1, "zlib": 2, "zstd": 3}

_request_ids = itertools.count(1)


def _compress(name: str, data: bytes) -> bytes:
    if name == "noop":
        return data
    if name == "snappy":
        return snappy.compress(data)
    if name == "zlib":
        return zlib.compress(data)
    if name == "zstd":
        return zstd.compress(data)
    raise ValueError(f"unknown compressor {name}")


def _decompress(compressor_id: int, data: bytes) -> bytes:
    if compressor_id == 0:
        return data
    if compressor_id == 1:
        return snappy.uncompress(data)
    if compressor_id == 2:
        return zlib.decompress(data)
    if compressor_id == 3:
        return zstd.decompress(data)
    raise ValueError(f"reply uses unknown compressor id {compressor_id}")


def frame(
    opcode: int, payload: bytes, request_id: int | None = None, response_to: int = 0
) -> bytes:
    """A complete message: the 16-byte header followed by `payload`."""
    rid = next(_request_ids) if request_id is None else request_id
    return HEADER.pack(HEADER.size + len(payload), rid, response_to, opcode) + payload


def op_msg_payload(
    body: dict, flags: int = 0, sequences: dict[str, list[dict]] | None = None
) -> bytes:
    """OP_MSG after the header: flagBits, a kind-0 body and optional kind-1 sequences."""
    out = struct.pack("<I", flags) + b"\x00" + bson.encode(body)
    for identifier, docs in (sequences or {}).items():
        content = identifier.encode() + b"\x00" + b"".join(bson.encode(d) for d in docs)
        out += b"\x01" + struct.pack("<i", 4 + len(content)) + content
    return out


def op_msg(body: dict, **kwargs) -> bytes:
    return frame(OP_MSG, op_msg_payload(body, **kwargs))


def op_query(collection: str, query: dict, number_to_return: int = -1) -> bytes:
    payload = (
        struct.pack("<i", 0)
        + collection.encode()
        + b"\x00"
        + struct.pack("<ii", 0, number_to_return)
        + bson.encode(query)
    )
    return frame(OP_QUERY, payload)


def compressed(message: bytes, compressor: str) -> bytes:
    """Wraps a complete message in OP_COMPRESSED, keeping its request id."""
    length, request_id, response_to, opcode = HEADER.unpack_from(message)
    original = message[HEADER.size :]
    payload = struct.pack("<iiB", opcode, len(original), COMPRESSOR_IDS[compressor]) + _compress(
        compressor, original
    )
    return frame(OP_COMPRESSED, payload, request_id, response_to)


@dataclass
class Reply:
    opcode: int  # the opcode on the wire (OP_COMPRESSED if the server compressed)
    inner_opcode: int  # the opcode after decompression
    compressor_id: int | None
    response_to: int
    doc: dict


def parse_reply(opcode: int, response_to: int, payload: bytes) -> Reply:
    inner_opcode, compressor_id = opcode, None
    if opcode == OP_COMPRESSED:
        inner_opcode, size, compressor_id = struct.unpack_from("<iiB", payload)
        payload = _decompress(compressor_id, payload[9:])
        assert len(payload) == size, f"uncompressedSize {size} but {len(payload)} bytes"
    if inner_opcode == OP_MSG:
        flags, kind = struct.unpack_from("<IB", payload)
        assert kind == 0, f"reply section kind {kind}"
        doc = bson.decode(payload[5 : 5 + struct.unpack_from("<i", payload, 5)[0]])
    elif inner_opcode == OP_REPLY:
        doc = bson.decode(payload[20 : 20 + struct.unpack_from("<i", payload, 20)[0]])
    else:
        raise AssertionError(f"reply has opcode {inner_opcode}")
    return Reply(opcode, inner_opcode, compressor_id, response_to, doc)


class RawConnection:
    """A socket to the server that sends bytes as given and reads whole messages."""

    def __init__(self, port: int, timeout_s: float = 10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def read_message(self) -> tuple[int, int, bytes] | None:
        """(opcode, responseTo, payload) of the next message, or None once the server closed.

        A reset connection counts as closed; a silent server raises socket.timeout.
        """
        try:
            header = self._read_exact(HEADER.size)
            if header is None:
                return None
            length, _request_id, response_to, opcode = HEADER.unpack(header)
            payload = self._read_exact(length - HEADER.size)
        except ConnectionResetError:
            return None
        if payload is None:
            return None
        return opcode, response_to, payload

    def read_reply(self) -> Reply:
        message = self.read_message()
        assert message is not None, "server closed the connection instead of replying"
        return parse_reply(*message)

    def command(self, body: dict, compressor: str | None = None, **kwargs) -> Reply:
        """Sends one OP_MSG command (optionally compressed) and returns the reply."""
        message = op_msg(body, **kwargs)
        if compressor:
            message = compressed(message, compressor)
        self.send(message)
        reply = self.read_reply()
        assert reply.response_to == HEADER.unpack_from(message)[1], "responseTo mismatch"
        return reply
