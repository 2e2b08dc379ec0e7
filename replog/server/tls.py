"""TLS contexts from Kafka's ssl.* keys, for a server's listener and for a client (the bundled client, the
inter-broker links).

Only PEM stores (ssl.keystore.type=PEM, KIP-651): the key and its chain in one file (ssl.keystore.location) or
as PEM text in the properties (ssl.keystore.certificate.chain + ssl.keystore.key); trusted certificates from a
PEM file (ssl.truststore.location) or PEM text (ssl.truststore.certificates). Keys for one listener may be
given as listener.name.<name>.ssl.* (Kafka's per-listener override, KIP-103).
"""

import logging
import os
import re
import ssl
import tempfile

from replog.security.principal_mapping import DEFAULT_MAPPER, PrincipalMapper

log = logging.getLogger(__name__)

TLS_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
                "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
DEFAULT_ENABLED_PROTOCOLS = "TLSv1.2,TLSv1.3"  # Kafka's default
CLIENT_AUTH_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
# Kafka names cipher suites as the JSSE (IANA) does; OpenSSL names TLS 1.2 suites differently. The AEAD suites
# anyone configures today translate by rule, e.g. TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 is ECDHE-RSA-AES256-GCM-SHA384.
_IANA_AEAD = re.compile(r"TLS_(ECDHE|DHE)_(RSA|ECDSA)_WITH_(AES_128_GCM_SHA256|AES_256_GCM_SHA384|"
                        r"CHACHA20_POLY1305_SHA256)")
_OPENSSL_CIPHER = {"AES_128_GCM_SHA256": "AES128-GCM-SHA256", "AES_256_GCM_SHA384": "AES256-GCM-SHA384",
                   "CHACHA20_POLY1305_SHA256": "CHACHA20-POLY1305"}
# TLS 1.3 suites keep their IANA names in OpenSSL, and Python's ssl module cannot restrict them.
TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"})


def listener_ssl_props(props: dict[str, str], listener_name: str) -> dict[str, str]:
    """The ssl.* and sasl.* keys that apply to one listener: the general ones, overridden by
    listener.name.<name>.<key> (Kafka lower-cases the listener name in these keys)."""
    prefix = f"listener.name.{listener_name.lower()}."
    merged = {k: v for k, v in props.items() if k.startswith(("ssl.", "sasl."))}
    merged.update({k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)})
    return merged


def openssl_cipher_name(name: str) -> str | None:
    """OpenSSL's name for a cipher suite given by its IANA (Kafka) or OpenSSL name; None for a TLS 1.3 suite."""
    if name in TLS13_SUITES:
        return None
    if match := _IANA_AEAD.fullmatch(name):
        kx, auth, cipher = match.groups()
        return f"{kx}-{auth}-{_OPENSSL_CIPHER[cipher]}"
    return name


def _apply_common(context: ssl.SSLContext, props: dict[str, str]) -> bool:
    """Protocol versions, cipher suites and trusted CAs; False if no truststore is configured."""
    enabled = [p.strip() for p in props.get("ssl.enabled.protocols", DEFAULT_ENABLED_PROTOCOLS).split(",")
               if p.strip()]
    unknown = [p for p in enabled if p not in TLS_VERSIONS]
    if unknown or not enabled:
        raise ValueError(f"ssl.enabled.protocols: unknown {unknown or enabled} (expected {', '.join(TLS_VERSIONS)})")
    versions = sorted(TLS_VERSIONS[p] for p in enabled)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if suites := [s.strip() for s in props.get("ssl.cipher.suites", "").split(",") if s.strip()]:
        tls12 = [name for s in suites if (name := openssl_cipher_name(s)) is not None]
        if tls12:
            try:
                context.set_ciphers(":".join(tls12))
            except ssl.SSLError as e:
                raise ValueError(f"ssl.cipher.suites: no usable cipher in {suites}") from e
    return _load_trust(context, props)


def _load_trust(context: ssl.SSLContext, props: dict[str, str]) -> bool:
    """Trusted CAs from the truststore keys; False if none are configured."""
    _require_pem(props, "ssl.truststore.type")
    location, certificates = props.get("ssl.truststore.location"), props.get("ssl.truststore.certificates")
    if location and certificates:
        raise ValueError("set ssl.truststore.location or ssl.truststore.certificates, not both")
    if location:
        context.load_verify_locations(cafile=location)
    elif certificates:
        context.load_verify_locations(cadata=certificates)
    return bool(location or certificates)


def _require_pem(props: dict[str, str], key: str) -> None:
    store_type = props.get(key, "PEM").upper()
    if store_type != "PEM":
        raise ValueError(f"{key}={store_type} is not supported: replog reads PEM stores only (KIP-651)")


def _load_keystore(context: ssl.SSLContext, props: dict[str, str], *, required: bool) -> None:
    _require_pem(props, "ssl.keystore.type")
    location = props.get("ssl.keystore.location")
    chain, key = props.get("ssl.keystore.certificate.chain"), props.get("ssl.keystore.key")
    password = props.get("ssl.key.password") or None
    if location and (chain or key):
        raise ValueError("set ssl.keystore.location or ssl.keystore.certificate.chain + ssl.keystore.key, not both")
    if location:
        context.load_cert_chain(location, password=password)
    elif chain and key:
        _load_cert_chain_text(context, chain, key, password)
    elif chain or key:
        raise ValueError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
    elif required:
        raise ValueError("a TLS listener needs a key: ssl.keystore.location, or ssl.keystore.certificate.chain "
                         "and ssl.keystore.key")


def _load_cert_chain_text(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """ssl's load_cert_chain reads files only: the PEM text goes through a private file, removed at once."""
    fd, path = tempfile.mkstemp(prefix="replog-keystore-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def server_context(props: dict[str, str]) -> ssl.SSLContext:
    """The context of a TLS listener; ValueError or ssl.SSLError names what is wrong."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    mode = props.get("ssl.client.auth", "none").strip().lower()
    if mode not in CLIENT_AUTH_MODES:
        raise ValueError(f"ssl.client.auth={mode!r}: expected none, requested or required")
    _load_keystore(context, props, required=True)
    if not _apply_common(context, props) and mode != "none":
        raise ValueError(f"ssl.client.auth={mode} needs a truststore to verify client certificates")
    context.verify_mode = CLIENT_AUTH_MODES[mode]
    return context


def client_context(props: dict[str, str]) -> ssl.SSLContext:
    """A client's context: trusts the truststore (or the system's CAs), presents the keystore if any (mTLS),
    and checks the server's host name unless ssl.endpoint.identification.algorithm is empty (Kafka: https)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _load_keystore(context, props, required=False)
    if not _apply_common(context, props):
        context.load_default_certs()
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("", "https"):
        raise ValueError(f"ssl.endpoint.identification.algorithm={algorithm!r}: expected https or empty")
    context.check_hostname = algorithm == "https"
    return context


def certificate_principal(der: bytes | None, mapper: PrincipalMapper = DEFAULT_MAPPER) -> str | None:
    """Kafka's principal for a TLS peer: `User:` and the name `mapper` (ssl.principal.mapping.rules) makes of
    the subject as X500Principal.getName() gives it (RFC 2253: most specific first, e.g.
    CN=alice,OU=eng,O=Example,C=US, the whole of it by default); None without a certificate. NoMatchingRule
    when no rule applies."""
    if not der:
        return None
    from cryptography import x509  # here, not at import: it costs every broker start ~15 ms

    return "User:" + mapper.name(x509.load_der_x509_certificate(der).subject.rfc4514_string())


def log_handshake_failures(context: ssl.SSLContext, listener_name: str) -> None:
    """Make context's TLS connections log one line when their handshake fails (plain text to a TLS port, an
    untrusted or expired client certificate). uvloop drops such connections without a word and without
    telling the connection's protocol; the SSLObject it drives (SSLContext.sslobject_class) sees the error."""

    class HandshakeLoggingSSLObject(ssl.SSLObject):
        def do_handshake(self) -> None:
            try:
                super().do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                raise
            except ssl.SSLError as e:
                log.info("TLS handshake on listener %s failed: %s", listener_name, e.reason or e)
                raise

    context.sslobject_class = HandshakeLoggingSSLObject
