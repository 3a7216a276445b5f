"""Recovery: rebuild the engine from the catalog log and the input archive (SPEC section 9).

Recovery re-executes the catalog log and replays the archive between its entries (frames merged across
inputs by timestamp), so the engine sees the same statements interleaved with the same input as the live run
did, and entity ids (``q3``, ``op:7``) come out the same. Before a catalog change the engine is run to
quiescence, live and in replay alike, so unprocessed input never straddles a change. Archived input goes
through the engine's ``push``/``update``, the same validation as live input.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dsms.errors import DsmsError

if TYPE_CHECKING:
    from dsms.runtime.runtime import Runtime

log = logging.getLogger("dsms.runtime")


def recover(rt: Runtime) -> dict[str, Any]:
    """Re-apply the saved catalog log and the archive; returns what was replayed (``runtime.recovery``)."""
    entries = rt.catalog_log.read()
    archive = rt.archive
    assert archive is not None
    readers = {name: archive.read(name) for name in archive.inputs()}
    pending: dict[str, Any] = {}
    replayed: dict[str, Any] = {"frames": 0, "elements": 0, "skipped": 0, "entries": 0}
    rt.recovering = True
    t0 = time.monotonic()
    try:
        for entry in entries:
            _replay_until(rt, readers, pending, entry.get("at") or {}, replayed)
            rt.pump.quiesce()
            try:
                rt.apply_entry(entry)
                replayed["entries"] += 1
            except Exception as e:  # noqa: BLE001 - a log entry that no longer applies is skipped, loudly
                log.error("catalog entry %s could not be re-applied: %s", entry, e)
            rt.catalog_log.entries.append(entry)
        _replay_until(rt, readers, pending, None, replayed)
        rt.pump.quiesce()
    finally:
        rt.recovering = False
    replayed["seconds"] = round(time.monotonic() - t0, 3)
    replayed["truncated_bytes"] = archive.truncated_bytes
    if entries or replayed["frames"]:
        log.info("recovered %d catalog entries and %d archived frames (%d elements) in %.2fs",
                 replayed["entries"], replayed["frames"], replayed["elements"], replayed["seconds"])
    return replayed


def _replay_until(rt: Runtime, readers: dict[str, Iterator[Any]], pending: dict[str, Any],
                  at: Mapping[str, int] | None, stats: dict[str, int]) -> None:
    """Push archived frames into the engine, merged across inputs by timestamp, up to the positions ``at``
    (per input: frames with seq < at[input]; None: everything)."""
    eng = rt.engine
    inputs = {s.name.lower(): (s.kind, s.columns) for s in (*eng.streams(), *eng.relations())}  # no DDL below
    heads: dict[str, Any] = {}
    for name, it in readers.items():
        rec = pending.pop(name, None)
        if rec is None:
            rec = next(it, None)
        if rec is not None:
            heads[name] = rec
    while heads:
        ready = {n: r for n, r in heads.items() if at is None or r.seq < at.get(n, 0)}
        if not ready:
            break
        name = min(ready, key=lambda n: (_record_ts(ready[n]), n))
        _replay_record(rt, inputs, heads[name], stats)
        nxt = next(readers[name], None)
        if nxt is None:
            del heads[name]
        else:
            heads[name] = nxt
        if stats["frames"] % 64 == 0:
            rt.pump.quiesce()
    pending.update(heads)


def _replay_record(rt: Runtime, inputs: Mapping[str, tuple[str, list]], rec: Any, stats: dict[str, int]) -> None:
    eng = rt.engine
    stats["frames"] += 1
    found = inputs.get(rec.input)
    try:
        if rec.is_heartbeat:
            if found is not None:
                eng.heartbeat(int(rec.ts), rec.input)
            return
        if found is None:
            stats["skipped"] += 1
            return
        kind, columns = found
        cols = {n: rec.cols[n] for n, _ in columns if n in rec.cols}
        if kind == "stream":
            eng.push(rec.input, cols, rec.ts)
        else:
            ins = rec.sign > 0
            eng.update(rec.input, insert={n: c[ins] for n, c in cols.items()},
                       delete={n: c[~ins] for n, c in cols.items()}, ts=int(rec.ts[0]))
        stats["elements"] += len(rec)
    except DsmsError as e:
        stats["skipped"] += 1
        log.error("archived frame %s #%d could not be replayed: %s", rec.input, rec.seq, e)


def _record_ts(rec: Any) -> int:
    if rec.is_heartbeat:
        return int(rec.ts)
    return int(rec.ts[0]) if len(rec.ts) else -(2**63)
