"""Server settings: embedded defaults, a TOML file, command-line flags, and their validation (SPEC section 10).

Precedence, lowest first: the defaults below, the TOML file given with ``--config``, then flags. Every key is
validated by type and range, and an invalid one is refused with a message that names the key, so ``dsms
serve`` can exit with one clear line instead of failing later in some unrelated place.

TOML layout (every key optional)::

    data_dir = "./dsms-data"
    host = "127.0.0.1"
    port = 8080
    mqtt_url = "mqtt://127.0.0.1:1883"
    token = "..."                         # bearer token for mutating endpoints; never logged
    protect_reads = false                 # true: reads (GET) need the token too (needs a token)
    catalog_recovery = "refuse"           # a damaged catalog: "refuse" to start, or start from "last-good"

    [limits]
    request_bytes = 16777216              # largest HTTP request body (413 above)
    statement_chars = 100000              # longest CQL text (413 above)
    max_queries = 1000                    # registered queries at once (409 above)
    ingest_backlog = 1000000              # unprocessed input tuples before 503 + Retry-After
    idle_timeout_s = 75                   # a connection idle (or stuck in its request headers) this long is closed

    [archive]
    fsync = "group"                       # "always" | "group" | "never"
    group_delay_ms = 2                    # longest wait before a group commit
    retention_ms = 0                      # 0: keep everything

    [engine]
    policy = "chain"                      # scheduling policy: fifo | round_robin | greedy | chain | chain_flush
    batch_budget = 64                     # queue items an operator consumes per run
    seed = 0                              # seed of SAMPLE's random choices

    [results]
    retention = 10000                     # result elements kept per query for ?from=
    subscriber_buffer = 10000             # elements buffered per reader before it gets a gap marker
    reader_buffer_bytes = 16777216        # bytes buffered per reader before it gets a gap marker
    reader_memory = 268435456             # bytes all readers may hold unread; past it the furthest behind goes
    slice_ms = 5                          # target length of one engine time slice
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ConfigError", "Config", "DEFAULTS", "load_config"]


class ConfigError(ValueError):
    """A setting that cannot be used; the message names the key (``limits.max_queries``) and why."""


DEFAULTS: dict[str, Any] = {
    "data_dir": "./dsms-data",
    "host": "127.0.0.1",
    "port": 8080,
    "mqtt_url": "mqtt://127.0.0.1:1883",
    "token": None,
    "protect_reads": False,
    "catalog_recovery": "refuse",
    "log_level": "info",
    "limits": {
        "request_bytes": 16 * 1024 * 1024,
        "statement_chars": 100_000,
        "max_queries": 1_000,
        "ingest_backlog": 1_000_000,
        "idle_timeout_s": 75.0,
    },
    "archive": {
        "fsync": "group",
        "group_delay_ms": 2,
        "retention_ms": 0,
    },
    "engine": {
        "policy": "chain",
        "batch_budget": 64,
        "seed": 0,
    },
    "results": {
        "retention": 10_000,
        "subscriber_buffer": 10_000,
        "reader_buffer_bytes": 16 * 1024 * 1024,
        "reader_memory": 256 * 1024 * 1024,
        "slice_ms": 5,
    },
}

# key -> (type, lower bound, upper bound or None, choices or None, may be None)
_SPEC: dict[str, tuple[type, float | None, float | None, tuple | None, bool]] = {
    "data_dir": (str, None, None, None, False),
    "host": (str, None, None, None, False),
    "port": (int, 0, 65535, None, False),
    "mqtt_url": (str, None, None, None, False),
    "token": (str, None, None, None, True),
    "protect_reads": (bool, None, None, None, False),
    "catalog_recovery": (str, None, None, ("refuse", "last-good"), False),
    "log_level": (str, None, None, ("debug", "info", "warning", "error"), False),
    "limits.request_bytes": (int, 1024, 1 << 34, None, False),
    "limits.statement_chars": (int, 16, 100_000_000, None, False),
    "limits.max_queries": (int, 1, 1_000_000, None, False),
    "limits.ingest_backlog": (int, 1, 1 << 40, None, False),
    "limits.idle_timeout_s": (float, 0.1, 86400, None, False),
    "archive.fsync": (str, None, None, ("always", "group", "never"), False),
    "archive.group_delay_ms": (float, 0, 1000, None, False),
    "archive.retention_ms": (int, 0, None, None, False),
    "engine.policy": (str, None, None, ("fifo", "round_robin", "greedy", "chain", "chain_flush"), False),
    "engine.batch_budget": (int, 1, 1_000_000, None, False),
    "engine.seed": (int, None, None, None, False),
    "results.retention": (int, 0, 100_000_000, None, False),
    "results.subscriber_buffer": (int, 1, 1_000_000, None, False),
    "results.reader_buffer_bytes": (int, 1024, 1 << 40, None, False),
    "results.reader_memory": (int, 1024, 1 << 44, None, False),
    "results.slice_ms": (float, 0.1, 1000, None, False),
}


@dataclass
class Config:
    """Validated settings. ``get("limits.max_queries")`` reads a dotted key; the attributes are shortcuts for
    the ones every layer needs."""

    values: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(DEFAULTS))

    def get(self, key: str) -> Any:
        node: Any = self.values
        for part in key.split("."):
            node = node[part]
        return node

    @property
    def data_dir(self) -> Path:
        return Path(self.values["data_dir"])

    @property
    def host(self) -> str:
        return self.values["host"]

    @property
    def port(self) -> int:
        return self.values["port"]

    @property
    def token(self) -> str | None:
        return self.values["token"]

    @property
    def mqtt_url(self) -> str:
        return self.values["mqtt_url"]

    def public(self) -> dict[str, Any]:
        """The settings with every secret masked, for ``GET /system`` and logs: the token, and the password of
        the MQTT broker URL (issue 18: ``mqtt://alice:secret@...`` was served to anyone)."""
        out = copy.deepcopy(self.values)
        if out.get("token") is not None:
            out["token"] = "***"
        out["mqtt_url"] = redact_url(out["mqtt_url"])
        return out


def redact_url(url: str) -> str:
    """``url`` with the password of its user information replaced by ``***``, for responses, logs and errors:
    a broker password never leaves the process (issue 18). The one masking function of the project.

    >>> redact_url("mqtt://alice:s3cr@t@broker:1883/x"), redact_url("mqtts://broker"), redact_url("mqtt://bob@h")
    ('mqtt://alice:***@broker:1883/x', 'mqtts://broker', 'mqtt://bob@h')
    >>> redact_url("mqtt://al:a/b@h/x"), redact_url("al:pw@h")
    ('mqtt://al:***@h/x', '<not a URL>')
    """
    if not isinstance(url, str):
        return "<not a string>"
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "<not a URL>" if "@" in url or ":" in url else url
    userinfo, at, host = rest.rpartition("@")       # the last '@': a password may hold '/' or '@'
    if not at or ":" not in userinfo:
        return url
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}"


def _merge(base: dict[str, Any], over: Mapping[str, Any], where: str, prefix: str = "") -> None:
    for k, v in over.items():
        key = f"{prefix}{k}"
        if k not in base:
            known = sorted(_SPEC) if not prefix else sorted(s for s in _SPEC if s.startswith(prefix))
            raise ConfigError(f"{where}: unknown setting '{key}' (known: {', '.join(known)})")
        if isinstance(base[k], dict):
            if not isinstance(v, Mapping):
                raise ConfigError(f"{where}: '{key}' must be a table of settings, not {v!r}")
            _merge(base[k], v, where, key + ".")
        else:
            base[k] = v


def _validate(values: dict[str, Any]) -> None:
    for key, (typ, lo, hi, choices, nullable) in _SPEC.items():
        node: Any = values
        parts = key.split(".")
        for p in parts[:-1]:
            node = node[p]
        v = node[parts[-1]]
        if v is None:
            if nullable:
                continue
            raise ConfigError(f"setting '{key}' must not be empty")
        if typ is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
            node[parts[-1]] = v
        if typ is bool:
            if not isinstance(v, bool):
                raise ConfigError(f"setting '{key}' must be true or false, not {type(v).__name__} {v!r}")
            continue
        if isinstance(v, bool) or not isinstance(v, typ):
            raise ConfigError(f"setting '{key}' must be {typ.__name__}, not {type(v).__name__} {v!r}")
        if choices is not None and v not in choices:
            raise ConfigError(f"setting '{key}' must be one of {', '.join(choices)}, not {v!r}")
        if lo is not None and v < lo:
            raise ConfigError(f"setting '{key}' must be >= {lo}, not {v!r}")
        if hi is not None and v > hi:
            raise ConfigError(f"setting '{key}' must be <= {hi}, not {v!r}")
        if typ is str and not nullable and not v:
            raise ConfigError(f"setting '{key}' must not be empty")
    if values["token"] is not None and (len(values["token"]) < 8 or any(c.isspace() for c in values["token"])):
        raise ConfigError("setting 'token' must be at least 8 characters without spaces")
    if values["protect_reads"] and values["token"] is None:
        raise ConfigError("setting 'protect_reads' needs a token (--token or DSMS_TOKEN): without one nobody "
                          "could read anything")
    url = values["mqtt_url"]
    if not (url.startswith("mqtt://") or url.startswith("mqtts://")):
        raise ConfigError(f"setting 'mqtt_url' must start with mqtt:// or mqtts://, not {redact_url(url)!r}")


def load_config(path: str | os.PathLike[str] | None = None, overrides: Mapping[str, Any] | None = None,
                env: Mapping[str, str] | None = None) -> Config:
    """Defaults, then the TOML file at ``path``, then ``overrides`` (dotted keys allowed, None values
    ignored, so argparse results can be passed as they are). ``DSMS_TOKEN`` in ``env`` supplies the token when
    neither the file nor a flag does, so it need not appear on a command line.

    >>> load_config(overrides={"port": 9000, "limits.max_queries": 5}).get("limits.max_queries")
    5
    """
    values = copy.deepcopy(DEFAULTS)
    if path is not None:
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {str(p)!r} does not exist") from None
        except OSError as e:
            raise ConfigError(f"config file {str(p)!r} cannot be read: {e.strerror}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"config file {str(p)!r} is not valid TOML: {e}") from None
        _merge(values, data, f"config file {str(p)!r}")
    if overrides:
        for key, v in overrides.items():
            if v is None:
                continue
            nested: dict[str, Any] = {}
            node = nested
            parts = key.split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = v
            _merge(values, nested, "flag")
    env = os.environ if env is None else env
    if values["token"] is None and env.get("DSMS_TOKEN"):
        values["token"] = env["DSMS_TOKEN"]
    _validate(values)
    return Config(values)
