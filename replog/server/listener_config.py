"""Listeners as Kafka configures them: `listeners=NAME://host:port,...`, each name mapped to a security protocol
by `listener.security.protocol.map`, each advertised at `advertised.listeners` (per name), one of them the
`inter.broker.listener.name`.

Pure rules: parsing and validation only, so a misconfigured listener is refused before anything binds (Kafka's
KafkaConfig validation; see also KIP-103, which introduced listener names distinct from protocols).
"""

import enum
from dataclasses import dataclass

from .properties import Listener, parse_listeners


class SecurityProtocol(enum.Enum):
    """Kafka's SecurityProtocol; the value is its id on the wire (BrokerRegistration, UpdateMetadata)."""

    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


# Kafka's default map: every protocol as a listener name of its own (EndPoint.DefaultSecurityProtocolMap).
DEFAULT_PROTOCOL_MAP = {p.name: p for p in SecurityProtocol}
DEFAULT_INTER_BROKER_LISTENER = "PLAINTEXT"  # security.inter.broker.protocol's default


@dataclass(frozen=True)
class ListenerSpec:
    """A listener the server binds: its name, address, protocol, and the address clients are told."""

    name: str
    host: str
    port: int
    protocol: SecurityProtocol
    advertised_host: str
    advertised_port: int  # 0: the port the listener gets once bound


def parse_security_protocol(value: str, listener_name: str) -> SecurityProtocol:
    try:
        return SecurityProtocol[value.strip().upper()]
    except KeyError:
        known = ", ".join(p.name for p in SecurityProtocol)
        raise ValueError(f"listener {listener_name}: unknown security protocol {value.strip()!r} "
                         f"(expected one of {known})") from None


def parse_protocol_map(value: str) -> dict[str, SecurityProtocol]:
    """`NAME:PROTOCOL,...` as listener.security.protocol.map takes it."""
    mapping = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"{item!r} is not of the form LISTENER_NAME:SECURITY_PROTOCOL")
        name = name.strip().upper()
        if name in mapping:
            raise ValueError(f"listener name {name} is mapped twice")
        mapping[name] = parse_security_protocol(protocol, name)
    return mapping


def effective_protocol_map(explicit: dict[str, SecurityProtocol] | None,
                           controller_listener_names: tuple[str, ...]) -> dict[str, SecurityProtocol]:
    """The configured map, or Kafka's default; with the default, controller listener names that are not in it
    are PLAINTEXT, as KafkaConfig.effectiveListenerSecurityProtocolMap does for KRaft (KIP-631)."""
    if explicit is not None:
        return explicit
    mapping = dict(DEFAULT_PROTOCOL_MAP)
    for name in controller_listener_names:
        mapping.setdefault(name, SecurityProtocol.PLAINTEXT)
    return mapping


def resolve_listeners(listeners: list[Listener], advertised: list[Listener] | None,
                      protocol_map: dict[str, SecurityProtocol]) -> list[ListenerSpec]:
    """Each listener with its protocol and advertised address; ValueError names the first misconfiguration."""
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ValueError(f"listeners: each listener name may appear once, got {', '.join(names)}")
    advertised_by_name = {}
    for item in advertised or []:
        if item.name not in names:
            raise ValueError(f"advertised.listeners names {item.name}, which is not in listeners "
                             f"({', '.join(names)})")
        if item.name in advertised_by_name:
            raise ValueError(f"advertised.listeners names {item.name} twice")
        advertised_by_name[item.name] = item
    specs = []
    for listener in listeners:
        protocol = protocol_map.get(listener.name)
        if protocol is None:
            raise ValueError(f"listener {listener.name}://{listener.host}:{listener.port} has no security protocol: "
                             f"add {listener.name}:<PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL> to "
                             f"listener.security.protocol.map")
        shown = advertised_by_name.get(listener.name, listener)
        specs.append(ListenerSpec(listener.name, listener.host, listener.port, protocol, shown.host, shown.port))
    return specs


def choose_inter_broker_listener(specs: list[ListenerSpec], configured: str | None) -> ListenerSpec:
    """inter.broker.listener.name's listener. Unset: Kafka's default, the PLAINTEXT listener; replog falls back
    to the first listener when there is none, so a single-listener broker needs no extra key."""
    by_name = {spec.name: spec for spec in specs}
    if configured is not None:
        name = configured.strip().upper()
        if name not in by_name:
            raise ValueError(f"inter.broker.listener.name={configured} is not one of the listeners "
                             f"({', '.join(by_name)})")
        return by_name[name]
    return by_name.get(DEFAULT_INTER_BROKER_LISTENER, specs[0])


def parse_listener_names(value: str) -> tuple[str, ...]:
    return tuple(name.strip().upper() for name in value.split(",") if name.strip())


def resolve_server_listeners(props: dict[str, str], default_listeners: str) -> list[ListenerSpec]:
    """A server's listeners from its properties (listeners, advertised.listeners, the protocol map and
    controller.listener.names): what both the broker and the controller process bind."""
    listeners = parse_listeners(props.get("listeners", default_listeners))
    advertised = parse_listeners(props["advertised.listeners"]) if props.get("advertised.listeners") else None
    explicit = (parse_protocol_map(props["listener.security.protocol.map"])
                if props.get("listener.security.protocol.map") else None)
    controller_names = parse_listener_names(props.get("controller.listener.names", ""))
    return resolve_listeners(listeners, advertised, effective_protocol_map(explicit, controller_names))
