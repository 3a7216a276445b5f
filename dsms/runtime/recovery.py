"""Recovery: rebuild the engine from the catalog log and the input archive (SPEC section 9).

Recovery re-executes the catalog log and replays the archive between its entries (frames merged across
inputs by timestamp), so the engine sees the same statements interleaved with the same input as the live run
did, and entity ids (``q3``, ``op:7``) come out the same: each entry records the id counters after it, and they
are restored after it whether it re-applied or not, so a failed entry never shifts the ids of later ones (and a
knob write never lands on another entity). Before a catalog change the engine is run to quiescence, live and in
replay alike, so unprocessed input never straddles a change. Archived input goes through the engine's
``push``/``update``, the same validation as live input.

Recovery says what it expected and did not find (``missing`` in ``runtime.recovery`` and an ERROR in the log):
archive frames the catalog saw written that the archive no longer has (a deleted segment or input directory),
an archive without a catalog (a deleted catalog), entries that failed to re-apply.
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
    replayed: dict[str, Any] = {"frames": 0, "elements": 0, "skipped": 0, "entries": 0, "failed_entries": [],
                                "missing": []}
    at: dict[str, int] = {}
    rt.recovering = True
    t0 = time.monotonic()
    try:
        for entry in entries:
            at.update(entry.get("at") or {})          # an entry stores only the positions that changed
            _replay_until(rt, readers, pending, at, replayed)
            rt.pump.quiesce()
            try:
                rt.apply_entry(entry)
                replayed["entries"] += 1
            except Exception as e:  # noqa: BLE001 - a log entry that no longer applies is skipped, loudly
                log.error("catalog entry #%s (%s) could not be re-applied: %s", entry.get("n"),
                          _what(entry), e)
                replayed["failed_entries"].append({"n": entry.get("n"), "entry": _what(entry),
                                                   "error": str(e)[:300]})
            if entry.get("ids"):
                rt.engine.advance_id_counters(entry["ids"])
            rt.catalog_log.restored(entry, at)
        _replay_until(rt, readers, pending, None, replayed)
        rt.pump.quiesce()
    finally:
        rt.recovering = False
    replayed["missing"] += _missing(rt, entries, at)
    for m in replayed["missing"]:
        log.error("recovery: %s", m)
    rep = rt.catalog_log.report
    replayed["catalog"] = {"source": rep.source, "torn_bytes": rep.torn_bytes, "set_aside": rep.set_aside,
                           "notes": rep.notes}
    replayed["seconds"] = round(time.monotonic() - t0, 3)
    replayed["truncated_bytes"] = archive.truncated_bytes
    # Hook for the archive's own damage report (issue 18 item 4, branch i18): when the Archive has
    # ``damage`` (lost frames found on open), say it here too, so /system's recovery section and the log tell
    # the whole story in one place; ``runtime.archive`` carries the details.
    damage = getattr(archive, "damage", None)
    if damage:
        replayed["archive_damaged_regions"] = len(damage)
    if entries or replayed["frames"]:
        log.info("recovered %d catalog entries and %d archived frames (%d elements) in %.2fs",
                 replayed["entries"], replayed["frames"], replayed["elements"], replayed["seconds"])
    return replayed


def _what(entry: Mapping[str, Any]) -> str:
    op = entry.get("op")
    if op == "cql":
        text = " ".join(str(entry.get("cql", "")).split())
        return text if len(text) <= 120 else text[:117] + "..."
    if op == "drop":
        return f"DROP {entry.get('name')}"
    if op == "set":
        return f"set {entry.get('entity')} {entry.get('values')}"
    return f"{op} {entry.get('values', entry.get('value', ''))}"


def _missing(rt: Runtime, entries: list[dict[str, Any]], at: Mapping[str, int]) -> list[str]:
    """What the catalog says was written and the data directory no longer has."""
    archive = rt.archive
    assert archive is not None
    ranges = archive.ranges()
    out: list[str] = []
    if not entries and ranges:
        out.append(f"there is no catalog ({rt.catalog_log.path.name} / {rt.catalog_log.snapshot.name}) but the "
                   f"archive holds input for {', '.join(sorted(ranges))}: nothing was replayed (the streams "
                   f"and queries must be registered again; the archive is kept)")
    for name, pos in sorted(at.items()):
        have = ranges[name].next_seq if name in ranges else 0
        if have < pos:
            where = "the archive has none of it" if name not in ranges else f"the archive ends at #{have - 1}"
            out.append(f"input {name!r}: the catalog saw archive frames up to #{pos - 1} written, {where} "
                       f"({pos - have} frame(s) missing: a segment or the input's directory was deleted)")
    return out


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
