"""The ``dsms`` command: ``serve``, ``shell``, ``run``, ``archive list|print``, and ``replay`` (SPEC sections 9
and 10; the client commands are in dsms/client/, docs/shell.md).

``dsms serve`` exits non-zero with one clear line on stderr when it cannot start (bad config, port taken,
data directory unwritable or held by another server), so a service manager or a script sees why at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from dsms.config import Config, ConfigError, load_config

log = logging.getLogger("dsms")


def _fail(message: str, code: int = 1) -> int:
    print(f"dsms: {message}", file=sys.stderr, flush=True)
    return code


def _config(args: argparse.Namespace) -> Config:
    overrides: dict[str, Any] = {"data_dir": getattr(args, "data_dir", None)}
    for key in ("host", "port", "mqtt_url", "token"):
        if hasattr(args, key):
            overrides[key] = getattr(args, key)
    if getattr(args, "protect_reads", False):
        overrides["protect_reads"] = True
    if getattr(args, "catalog_recovery", None):
        overrides["catalog_recovery"] = args.catalog_recovery
    if getattr(args, "fsync", None):
        overrides["archive.fsync"] = args.fsync
    return load_config(args.config, overrides)


# ---------------------------------------------------------------- serve


async def _serve(cfg: Config) -> int:
    from web.server import serve  # the one door from the command line into the server
    return await serve(cfg)


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        cfg = _config(args)
    except ConfigError as e:
        return _fail(f"bad configuration: {e}", 2)
    logging.basicConfig(level=getattr(logging, cfg.get("log_level").upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_serve(cfg))
    except KeyboardInterrupt:
        return 130


# ---------------------------------------------------------------- archive


def _open_archive(args: argparse.Namespace) -> Any:
    from dsms.archive import Archive
    cfg = _config(args)
    root = cfg.data_dir / "archive"
    if not root.is_dir():
        raise FileNotFoundError(f"no archive under {str(cfg.data_dir)!r}")
    return Archive(cfg.data_dir, read_only=True)


def cmd_archive(args: argparse.Namespace) -> int:
    from dsms.archive import ArchiveError
    from dsms.errors import DsmsError
    from dsms.formats import parse_ts
    from dsms.formats.json_codec import dumps
    try:
        arch = _open_archive(args)
    except ConfigError as e:
        return _fail(f"bad configuration: {e}", 2)
    except (FileNotFoundError, ArchiveError, OSError) as e:
        return _fail(str(e))
    try:
        if args.action == "list":
            ranges = arch.ranges()
            if args.json:
                print(json.dumps({k: vars(v) for k, v in ranges.items()}, indent=1))
                return 0
            print(f"{'input':24} {'first_ts':>16} {'last_ts':>16} {'frames':>9} {'bytes':>12} {'segments':>8}")
            for name, r in ranges.items():
                print(f"{name:24} {str(r.first_ts):>16} {str(r.last_ts):>16} {r.frames:>9} {r.bytes:>12} "
                      f"{r.segments:>8}")
            return 0
        lo = _ts_arg(args.from_ts, parse_ts)
        hi = _ts_arg(args.to_ts, parse_ts)
        inputs = [args.input.lower()] if args.input else arch.inputs()
        out = sys.stdout
        for name in inputs:
            for rec in arch.read(name, lo, hi):
                if rec.is_heartbeat:
                    out.write(dumps({"input": name, "seq": rec.seq, "heartbeat": int(rec.ts)}) + "\n")
                    continue
                for t, s, row in rec.rows():
                    out.write(dumps({"input": name, "seq": rec.seq, "ts": t, "sign": s, "row": row}) + "\n")
        return 0
    except BrokenPipeError:
        return 0
    except (ArchiveError, ValueError, DsmsError) as e:
        return _fail(str(e))
    finally:
        arch.close()


def _ts_arg(value: str | None, parse_ts: Any) -> int | None:
    """A --from/--to value: milliseconds, or an ISO 8601 date-time."""
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return parse_ts(value)


def _url(args: argparse.Namespace) -> str:
    import os

    from dsms.client.http import DEFAULT_URL
    return args.url or os.environ.get("DSMS_URL") or DEFAULT_URL


def _token(args: argparse.Namespace) -> str | None:
    import os
    return args.token or os.environ.get("DSMS_TOKEN") or None


def cmd_shell(args: argparse.Namespace) -> int:
    try:
        from dsms.client.shell import run_shell
        return run_shell(_url(args), _token(args))
    except ValueError as e:
        return _fail(str(e), 2)


def cmd_run(args: argparse.Namespace) -> int:
    try:
        from dsms.client.run import run_file
        return run_file(args.file, _url(args), _token(args))
    except ValueError as e:
        return _fail(str(e), 2)


def cmd_replay(args: argparse.Namespace) -> int:
    """``dsms replay``: a query over an archived time range on Spark (docs/replay.md). Every check that needs
    no Spark runs first; on any error nothing is written to ``--out`` and the exit status is 1."""
    from dsms.errors import DsmsError
    from dsms.formats import parse_ts
    from dsms.spark.replay import DEFAULT_MASTER, prepare, run, summary_text
    from dsms.spark.spec import ReplayError

    try:
        cfg = _config(args)
    except ConfigError as e:
        return _fail(f"bad configuration: {e}", 2)
    try:
        lo = _ts_arg(args.from_ts, parse_ts)
        hi = _ts_arg(args.to_ts, parse_ts)
    except (ValueError, DsmsError) as e:
        return _fail(f"bad --from/--to: {e}", 2)
    master = args.master or DEFAULT_MASTER
    try:
        prepared = prepare(str(cfg.data_dir), query=args.query, query_id=args.query_id, from_ts=lo, to_ts=hi,
                           master=master, partitions=args.partitions, strategy=args.strategy,
                           out=None if args.explain else args.out)
        if args.explain:
            print(prepared.strategy.explain())
            return 0
        from dsms.spark.progress import ReplayProgress

        with ReplayProgress(f"replay on {master}", enabled=False if args.quiet else None) as bar:
            summary, result = run(prepared, out=args.out, on_progress=bar.update)
    except ReplayError as e:
        return _fail(str(e))
    except DsmsError as e:
        return _fail(f"replay failed: {e}")
    if args.out is None:
        from dsms.spark.output import write_ndjson_stream

        try:
            write_ndjson_stream(sys.stdout, prepared.names, result.ts, result.sign, result.cols)
            sys.stdout.flush()
        except BrokenPipeError:
            return 0
    if args.json_summary:
        print(json.dumps(summary), file=sys.stderr)
    else:
        print(summary_text(summary), file=sys.stderr)
    return 0


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dsms", description="dsms: a data stream management system (CQL over "
                                                         "streams and relations)")
    from dsms import __version__
    p.add_argument("--version", action="version", version=f"dsms {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the HTTP server")
    s.add_argument("--config", help="TOML config file")
    s.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=int, help="port (default 8080)")
    s.add_argument("--data-dir", help="data directory (default ./dsms-data)")
    s.add_argument("--mqtt-url", help="default MQTT broker URL (default mqtt://127.0.0.1:1883)")
    s.add_argument("--token", help="bearer token for mutating requests (or DSMS_TOKEN)")
    s.add_argument("--protect-reads", action="store_true", default=None,
                   help="reads (GET) need the token too; for a server reachable beyond this machine")
    s.add_argument("--catalog-recovery", choices=("refuse", "last-good"),
                   help="a damaged catalog: refuse to start (default), or start from its last good state")
    s.add_argument("--fsync", choices=("always", "group", "never"), help="archive durability mode")
    s.set_defaults(func=cmd_serve)

    for name, help_ in (("shell", "interactive CQL prompt against a running server"),
                        ("run", "run the statements of a CQL file against a running server")):
        c = sub.add_parser(name, help=help_)
        if name == "run":
            c.add_argument("file", help="the CQL file ('-' for standard input)")
        c.add_argument("--url", help="the server (default $DSMS_URL or http://127.0.0.1:8080)")
        c.add_argument("--token", help="bearer token for changes (default $DSMS_TOKEN)")
        c.set_defaults(func=cmd_shell if name == "shell" else cmd_run)

    a = sub.add_parser("archive", help="inspect the input archive")
    a.add_argument("action", choices=("list", "print"))
    a.add_argument("--config", help="TOML config file")
    a.add_argument("--data-dir", help="data directory (default ./dsms-data)")
    a.add_argument("--input", help="only this stream or relation")
    a.add_argument("--from", dest="from_ts", help="first timestamp (ms or ISO 8601)")
    a.add_argument("--to", dest="to_ts", help="end timestamp, exclusive")
    a.add_argument("--json", action="store_true", help="list: JSON output")
    a.set_defaults(func=cmd_archive)

    r = sub.add_parser("replay", help="run a query over archived input on Spark (docs/replay.md)")
    r.add_argument("--config", help="TOML config file")
    r.add_argument("--data-dir", help="data directory (default ./dsms-data)")
    which = r.add_mutually_exclusive_group(required=True)
    which.add_argument("--query", help="CQL text of the query to run")
    which.add_argument("--query-id", help="a registered query's id (q3) or name, from the catalog")
    r.add_argument("--from", dest="from_ts", help="first instant whose results are written (ms or ISO 8601)")
    r.add_argument("--to", dest="to_ts", help="end instant, exclusive")
    r.add_argument("--master", help="Spark master: local[*] (default), local[N], spark://host:port")
    r.add_argument("--partitions", type=int, help="Spark partitions (default: the master's cores)")
    r.add_argument("--strategy", choices=("key-partitioned", "time-sliced", "single"),
                   help="force a parallel strategy (refused when the plan does not allow it)")
    r.add_argument("--out", help="FILE.ndjson, FILE.parquet or a new DIR (default: NDJSON on stdout)")
    r.add_argument("--explain", action="store_true", help="print the chosen strategy and why, run nothing")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--json-summary", action="store_true", help="the summary as one JSON line on stderr")
    r.set_defaults(func=cmd_replay)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsms`` console script."""
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
