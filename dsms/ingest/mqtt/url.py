"""Broker addresses: ``mqtt://[user[:pass]@]host[:port]`` parsed once, at start, so that a bad ``--mqtt-url`` is
refused with what is wrong instead of retried forever; and the aiomqtt client arguments they stand for."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from dsms.config import redact_url


@dataclass(frozen=True)
class MqttUrl:
    """A parsed broker address. ``tls`` is set by the ``mqtts://`` / ``ssl://`` schemes."""

    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)   # never shown in logs or reprs
    tls: bool = False


_SCHEMES = {"mqtt": (1883, False), "tcp": (1883, False), "mqtts": (8883, True), "ssl": (8883, True)}


def parse_mqtt_url(url: str) -> MqttUrl:
    """``mqtt://[user[:pass]@]host[:port]`` (also ``tcp://``; ``mqtts://`` and ``ssl://`` for TLS, default port
    8883). Raises ValueError with what is wrong, so that a bad ``--mqtt-url`` is refused at start, not retried
    forever."""
    shown = redact_url(url)
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"bad MQTT URL {shown!r}: expected mqtt://host[:port] (or tcp://, mqtts://)")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError(f"bad MQTT URL {shown!r}: unknown scheme {parts.scheme!r} "
                         f"(expected one of {', '.join(sorted(_SCHEMES))})")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"bad MQTT URL {shown!r}: a broker URL has no path, query or fragment")
    if not parts.hostname:
        raise ValueError(f"bad MQTT URL {shown!r}: no host")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad MQTT URL {shown!r}: the port is not a number in 1..65535") from None
    default_port, tls = _SCHEMES[scheme]
    return MqttUrl(parts.hostname, port or default_port,
                   unquote(parts.username) if parts.username is not None else None,
                   unquote(parts.password) if parts.password is not None else None, tls)


def client_kwargs(u: MqttUrl) -> dict[str, Any]:
    kw: dict[str, Any] = {"hostname": u.host, "port": u.port}
    if u.username is not None:
        kw["username"] = u.username
        kw["password"] = u.password
    if u.tls:
        kw["tls_context"] = ssl.create_default_context()
    return kw
