"""``read_catalog_entries``: how tools that are not the server (``dsms replay``, dsms/spark) read a data
directory's catalog, in the log format of issue 18 and in the older ``catalog.json``, without changing a file
(a server may be running on the directory)."""

from __future__ import annotations

import json

import pytest

from dsms.runtime.catalog_log import _HEADER, CatalogDamaged, encode_line, read_catalog_entries


def _write(path, *objs, tail: bytes = b"") -> None:
    path.write_bytes(b"".join(encode_line(o) for o in objs) + tail)


def test_snapshot_and_log_in_order_with_full_positions_and_files_untouched(tmp_path):
    e1 = {"n": 1, "op": "cql", "cql": "REGISTER STREAM S (a INT)", "at": {"s": 0}}
    e2 = {"n": 2, "op": "cql", "cql": "REGISTER STREAM T (a INT)", "at": {"t": 3}}
    e3 = {"n": 3, "op": "drop", "name": "T", "at": {"s": 5}}
    _write(tmp_path / "catalog.snapshot", _HEADER, e1, e2)
    _write(tmp_path / "catalog.log", _HEADER, e2, e3, tail=b"1234abcd {\"n\": 4, \"op")   # torn last line
    before = (tmp_path / "catalog.log").read_bytes()
    got = read_catalog_entries(tmp_path)
    assert [e["n"] for e in got] == [1, 2, 3]                 # e2 of the log is already in the snapshot
    assert [e["at"] for e in got] == [{"s": 0}, {"s": 0, "t": 3}, {"s": 5, "t": 3}]
    assert got[2]["name"] == "T"
    assert (tmp_path / "catalog.log").read_bytes() == before   # the torn line is left out, not cut


def test_legacy_catalog_json(tmp_path):
    log = [{"op": "cql", "cql": "REGISTER STREAM S (a INT)", "at": {}},
           {"op": "cql", "cql": "SELECT * FROM S", "at": {"s": 2}}]
    (tmp_path / "catalog.json").write_text(json.dumps({"version": 1, "log": log}))
    got = read_catalog_entries(tmp_path)
    assert [e["cql"] for e in got] == ["REGISTER STREAM S (a INT)", "SELECT * FROM S"]
    assert got[1]["at"] == {"s": 2}


def test_damage_inside_the_log_is_an_error_naming_the_file(tmp_path):
    e1 = {"n": 1, "op": "cql", "cql": "REGISTER STREAM S (a INT)", "at": {}}
    e2 = {"n": 2, "op": "cql", "cql": "REGISTER STREAM T (a INT)", "at": {}}
    good = encode_line(e1)
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x01                             # a flipped bit: its checksum no longer matches
    (tmp_path / "catalog.log").write_bytes(encode_line(_HEADER) + bytes(bad) + encode_line(e2))
    with pytest.raises(CatalogDamaged, match="catalog.log"):
        read_catalog_entries(tmp_path)


def test_no_catalog_is_no_entries(tmp_path):
    assert read_catalog_entries(tmp_path) == []
