"""A listener's security from the server's properties: the TLS context of an SSL or SASL_SSL listener and the
SASL mechanisms of a SASL_PLAINTEXT or SASL_SSL one. Everything that can be wrong is found here, at startup,
so a listener either serves the protocol its name maps to or the server refuses to start."""

import re
import ssl

from replog.security.principal_mapping import PRINCIPAL_MAPPING_RULES_KEY, PrincipalMapper

from .auth import INTER_BROKER_ONLY, ONLY_SECRET_HOLDERS, ClusterMembers
from .credential_store import PLAIN_JAAS_KEY, SCRAM_CREDENTIALS_FILE_KEY, PropertiesCredentialStore
from .listener import ListenerSecurity
from .listener_config import ListenerSpec
from .reauth import MAX_REAUTH_KEY, max_reauth_ms_by_mechanism
from .sasl import CredentialStore, ListenerSasl, parse_enabled_mechanisms
from .scram_credentials import LayeredCredentialStore
from .tls import listener_ssl_props, log_handshake_failures, server_context

KAFKA_DEFAULT_MECHANISMS = "GSSAPI"  # Kafka's sasl.enabled.mechanisms default, which replog does not offer
# The ssl.* and sasl.* keys a listener reads (also under listener.name.<l>.); others are reported as unknown.
LISTENER_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
    PRINCIPAL_MAPPING_RULES_KEY,
    "sasl.enabled.mechanisms", SCRAM_CREDENTIALS_FILE_KEY, PLAIN_JAAS_KEY,
})
_LISTENER_PREFIX = re.compile(r"listener\.name\.[^.]+\.")
# KIP-368's key, also as listener.name.<l>.<mechanism, lower case>.connections.max.reauth.ms
_MAX_REAUTH = re.compile(r"(listener\.name\.[^.]+\.((plain|scram-sha-256|scram-sha-512)\.)?)?"
                         + re.escape(MAX_REAUTH_KEY))


def is_listener_key(key: str) -> bool:
    """Whether key is one a listener reads, directly or as listener.name.<l>.<key> (a JAAS configuration
    only that way, as in Kafka)."""
    if _MAX_REAUTH.fullmatch(key):
        return True
    return _LISTENER_PREFIX.sub("", key, count=1) in LISTENER_KEYS and key != PLAIN_JAAS_KEY


def build_listener_security(spec: ListenerSpec, props: dict[str, str],
                            metadata_credentials: CredentialStore | None = None,
                            members: ClusterMembers = ONLY_SECRET_HOLDERS) -> ListenerSecurity:
    """ValueError names the listener and what is missing or wrong. metadata_credentials: the SCRAM credentials
    of the metadata log (KIP-554), consulted before the listener's own (sasl.scram.credentials.file); members:
    which of its principals may perform cluster actions."""
    listener_props = listener_ssl_props(props, spec.name)
    try:
        context = server_context(listener_props) if spec.protocol.uses_tls else None
        mapper = PrincipalMapper.parse(listener_props.get(PRINCIPAL_MAPPING_RULES_KEY))
        sasl = INTER_BROKER_ONLY
        if spec.protocol.uses_sasl:
            mechanisms = parse_enabled_mechanisms(
                listener_props.get("sasl.enabled.mechanisms", KAFKA_DEFAULT_MECHANISMS))
            store: CredentialStore = PropertiesCredentialStore.from_listener_props(listener_props)
            if metadata_credentials is not None:
                store = LayeredCredentialStore(metadata_credentials, store)
            max_reauth = max_reauth_ms_by_mechanism(props, spec.name, mechanisms)
            sasl = ListenerSasl(mechanisms, store, required=True, max_reauth_ms=tuple(max_reauth.items()))
    except (ValueError, OSError) as e:  # ssl.SSLError and a missing file are OSErrors
        reason = e.reason if isinstance(e, ssl.SSLError) and e.reason else e
        raise ValueError(f"listener {spec.name} ({spec.protocol.name}): {reason}") from e
    if context is not None:
        log_handshake_failures(context, spec.name)
    return ListenerSecurity(spec.name, context, sasl, members, mapper)
