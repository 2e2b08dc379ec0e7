"""Properties files as Kafka's servers take them: a server.properties-style file plus `--override key=value`,
and the value parsers every server's configuration shares (booleans, listeners)."""

import re
from dataclasses import dataclass
from pathlib import Path

from replog.client.properties_file import parse_properties


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_.-]+)://(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:/\[\]]*)):(?P<port>\d+)")


def parse_listeners(value: str) -> list[Listener]:
    """NAME://host:port,... as Kafka's listeners: names such as SASL_SSL are no URL schemes (the underscore),
    an empty host means every address, an IPv6 host is in brackets."""
    listeners = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        match = _LISTENER.fullmatch(item)
        port = int(match["port"]) if match else -1
        if match is None or port > 65535:
            raise ValueError(f"listener {item!r} is not of the form NAME://host:port")
        host = match["ipv6"] or match["host"] or "0.0.0.0"
        listeners.append(Listener(match["name"].upper(), host, port))
    if not listeners:
        raise ValueError("no listeners configured")
    return listeners


def parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"expected true or false, got {value!r}")
    return lowered == "true"


def read_properties(path: str | Path | None, overrides: list[str]) -> dict[str, str]:
    """A properties file (if any) with `key=value` overrides applied on top, as Kafka's scripts take them."""
    props = parse_properties(Path(path).read_text()) if path else {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--override expects key=value, got {item!r}")
        props[key.strip()] = value.strip()
    return props
