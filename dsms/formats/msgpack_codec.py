"""msgpack input (SPEC section 6): the same items as JSON, row-wise or columnar ``{"ts": [...], "cols": {...}}``.

A body is one msgpack object (an array of items or one item) or several objects back to back (a stream of
items, like NDJSON). Timestamps may also be msgpack Timestamp extension values. The unpacker is bounded by
the body itself, so a hostile length prefix cannot make it allocate more than was sent.
"""

from __future__ import annotations

from typing import Any

import msgpack

from dsms.errors import InputError

__all__ = ["decode_msgpack", "encode_columnar"]


def decode_msgpack(body: bytes, b: Any) -> None:
    """Feed every item of ``body`` to the builder ``b``."""
    if not body:
        raise InputError("the body is empty")
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


def encode_columnar(ts: list[int], cols: dict[str, list], sign: list[int] | None = None) -> bytes:
    """A columnar batch as a client sends it (used by the benchmark and the tests).

    >>> len(encode_columnar([1, 2], {"a": [1, 2]})) > 0
    True
    """
    obj: dict[str, Any] = {"ts": ts, "cols": cols}
    if sign is not None:
        obj["sign"] = sign
    return msgpack.packb(obj, use_bin_type=True)
