"""msgpack input (SPEC section 6): the same items as JSON, row-wise or columnar ``{"ts": [...], "cols": {...}}``.

A body is one msgpack object (an array of items or one item) or several objects back to back (a stream of
items, like NDJSON). Timestamps may also be msgpack Timestamp extension values. The unpacker is bounded by
the body itself, so a hostile length prefix cannot make it allocate more than was sent.

A body that is exactly one columnar batch (the fast ingest format) takes a shortcut: a numeric column whose
values all have one msgpack encoding of fixed width (every int in -32..127, every float64, every uint64, ...)
is read straight into a numpy array, by a strided view of the body, without making a Python object per value;
its type is then known without a per-value check. Anything else in the batch (strings, ``sign``, columns of
mixed encodings) is decoded by msgpack itself, and any body the shortcut is not sure about is decoded the
ordinary way from the start, so what is accepted or refused, and the messages, are the same either way.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from dsms.errors import InputError

__all__ = ["decode_msgpack", "encode_columnar"]


def unpack_one(body: bytes, what: str = "body") -> Any:
    """Exactly one msgpack object (an MQTT payload), with the options of ``decode_msgpack``; InputError
    saying why not."""
    if not body:
        raise InputError(f"the {what} is empty")
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=False, timestamp=0)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError,
            msgpack.OutOfData, RecursionError, MemoryError) as e:
        raise InputError(f"{what} is not valid msgpack: {type(e).__name__}: {str(e)[:200]}") from None


def decode_msgpack(body: bytes, b: Any) -> None:
    """Feed every item of ``body`` to the builder ``b``."""
    if not body:
        raise InputError("the body is empty")
    item = columnar_fast(body)
    if item is not None:
        b.add(item)
        return
    up = msgpack.Unpacker(raw=False, strict_map_key=False, timestamp=0, max_buffer_size=max(len(body), 1024))
    try:
        up.feed(body)
        objects = 0
        for obj in up:
            objects += 1
            if isinstance(obj, list):
                for item in obj:
                    b.add(item)
            else:
                b.add(obj)
    except InputError:
        raise
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError,
            msgpack.OutOfData, RecursionError, MemoryError) as e:
        raise InputError(f"body is not valid msgpack after {b.items} item(s): {type(e).__name__}: "
                         f"{str(e)[:200]}", index=b.items) from None
    if up.tell() != len(body):
        raise InputError(f"body ends inside a msgpack object (after {b.items} item(s))", index=b.items)


# fixed-width msgpack encodings of one number: tag -> (bytes per value including the tag, big-endian dtype)
_FIXED = {0xCA: (5, ">f4"), 0xCB: (9, ">f8"), 0xCC: (2, "u1"), 0xCD: (3, ">u2"), 0xCE: (5, ">u4"),
          0xCF: (9, ">u8"), 0xD0: (2, "i1"), 0xD1: (3, ">i2"), 0xD2: (5, ">i4"), 0xD3: (9, ">i8")}
_INT64_MAX = 2**63 - 1


class _NotFast(Exception):
    """The body is not one plain columnar batch: decode it the ordinary way."""


def columnar_fast(body: bytes) -> dict[str, Any] | None:
    """``body`` decoded as one columnar batch item (``{"cols": {...}, ...}``, alone or as the only element of
    an array) with uniformly encoded numeric columns as numpy arrays; None when the body is anything else
    (it is then decoded by the ordinary path, which also finds any error)."""
    try:
        return _Reader(body).batch()
    except Exception:  # noqa: BLE001 - whatever it is, the ordinary path decodes the body and names any error
        return None


class _Reader:
    __slots__ = ("body", "buf", "pos")

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.buf = np.frombuffer(body, dtype=np.uint8)
        self.pos = 0

    def batch(self) -> dict[str, Any]:
        t = self.body[0]
        if 0x90 <= t <= 0x9F or t in (0xDC, 0xDD):            # [item]: only an array of exactly one item
            if self._array_len() != 1:
                raise _NotFast
        item: dict[str, Any] = {}
        for _ in range(self._map_len()):
            key = self._str()
            if key == "cols":
                cols: dict[str, Any] = {}
                for _ in range(self._map_len()):
                    name = self._str()
                    cols[name] = self._column()
                item[key] = cols
            elif key == "ts":
                col = self._column()
                item[key] = col if not isinstance(col, np.ndarray) or col.dtype == np.int64 else col.tolist()
            else:
                item[key] = self._any()
        if self.pos != len(self.body) or "cols" not in item:
            raise _NotFast
        return item

    def _be(self, size: int) -> int:
        v = int.from_bytes(self.body[self.pos:self.pos + size], "big")
        self.pos += size
        return v

    def _array_len(self) -> int:
        return self._len(0x90, 0xDC)

    def _map_len(self) -> int:
        return self._len(0x80, 0xDE)

    def _len(self, fix: int, wide: int) -> int:
        """The length of an array or map header: a fix type (``fix`` .. ``fix | 0x0F``), or the 16-bit
        (``wide``) and 32-bit (``wide + 1``) forms."""
        t = self.body[self.pos]
        self.pos += 1
        if fix <= t <= fix | 0x0F:
            return t & 0x0F
        if t == wide:
            return self._be(2)
        if t == wide + 1:
            return self._be(4)
        raise _NotFast

    def _str(self) -> str:
        t = self.body[self.pos]
        self.pos += 1
        if 0xA0 <= t <= 0xBF:
            n = t & 0x1F
        elif t in (0xD9, 0xDA, 0xDB):
            n = self._be({0xD9: 1, 0xDA: 2, 0xDB: 4}[t])
        else:
            raise _NotFast
        end = self.pos + n
        if end > len(self.body):
            raise _NotFast
        out = self.body[self.pos:end].decode("utf-8")
        self.pos = end
        return out

    def _column(self) -> Any:
        """One column: a numpy array when every value has the same fixed-width numeric encoding, else what
        msgpack decodes (a list)."""
        start = self.pos
        t = self.body[start]
        if not (0x90 <= t <= 0x9F or t in (0xDC, 0xDD)):
            return self._any()
        n = self._array_len()
        if n == 0:
            return self._any(start)
        buf, pos = self.buf, self.pos
        t = self.body[pos]
        if t < 0x80 or t >= 0xE0:                              # 1-byte ints: positive and negative fixint
            seg = buf[pos:pos + n]
            if len(seg) == n and ((seg < 0x80) | (seg >= 0xE0)).all():
                self.pos = pos + n
                return seg.view(np.int8).astype(np.int64)
        elif t in (0xC2, 0xC3):                                # booleans
            seg = buf[pos:pos + n]
            if len(seg) == n and ((seg == 0xC2) | (seg == 0xC3)).all():
                self.pos = pos + n
                return seg == 0xC3
        elif t in _FIXED:
            width, dt = _FIXED[t]
            end = pos + width * n
            if end <= len(buf) and (buf[pos:end:width] == t).all():
                vals = np.ndarray((n,), dtype=dt, buffer=self.body, offset=pos + 1, strides=(width,))
                self.pos = end
                if vals.dtype.kind == "f":
                    return vals.astype(np.float64) if t == 0xCB else vals.astype(np.float32)
                if vals.dtype.kind == "u" and t == 0xCF and int(vals.max()) > _INT64_MAX:
                    return vals.astype(np.uint64)
                return vals.astype(np.int64)
        return self._any(start)

    def _any(self, start: int | None = None) -> Any:
        """One object decoded by msgpack, from ``start`` (default: the current position)."""
        if start is None:
            start = self.pos
        up = msgpack.Unpacker(raw=False, strict_map_key=False, timestamp=0,
                              max_buffer_size=max(len(self.body) - start, 1024))
        up.feed(memoryview(self.body)[start:])
        obj = up.unpack()
        self.pos = start + up.tell()
        return obj


def encode_columnar(ts: list[int], cols: dict[str, list], sign: list[int] | None = None) -> bytes:
    """A columnar batch as a client sends it (used by the benchmark and the tests).

    >>> len(encode_columnar([1, 2], {"a": [1, 2]})) > 0
    True
    """
    obj: dict[str, Any] = {"ts": ts, "cols": cols}
    if sign is not None:
        obj["sign"] = sign
    return msgpack.packb(obj, use_bin_type=True)
