"""Key material for the test registry (registry.md §5.3), generated per session with ``cryptography``.

- a test CA and a ``localhost`` server certificate it signs (SAN ``DNS:localhost,
  IP:127.0.0.1``), used by the TLS registry, the HTTPS issuer and the fault proxy;
- the token issuer's P-256 signing key with a self-signed certificate (CN
  ``npa-test-issuer``): the registry's ``rootcertbundle`` and the JWT's ``x5c[0]``;
- a rogue P-256 key and self-signed certificate the registry does not trust.

Everything is ECDSA P-256: generation takes milliseconds, so no files are
checked in. The CA carries the extensions strict X.509 verification wants
(critical basicConstraints and keyUsage, SKI/AKI), so clients may use it as
their only trust anchor (``verify=<ca_path>``).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["ISSUER_NAME", "Pki", "SigningIdentity", "libtrust_kid"]

ISSUER_NAME = "npa-test-issuer"
_VALIDITY = datetime.timedelta(days=7)


def libtrust_kid(public_key: ec.EllipticCurvePublicKey) -> str:
    """The libtrust key id distribution matches a JWT ``kid`` against (registry.md §5.3).

    SHA-256 of the DER SubjectPublicKeyInfo, first 30 bytes, base32 (48
    characters), joined in 12 groups of 4 with ``:``.
    """
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    encoded = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode("ascii")
    return ":".join(encoded[i : i + 4] for i in range(0, len(encoded), 4))


@dataclass(frozen=True)
class SigningIdentity:
    """A P-256 key and its self-signed certificate (a token signer)."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate
    cert_path: Path

    @property
    def x5c(self) -> list[str]:
        """The JWT header's ``x5c``: the base64 (not base64url) DER certificate."""
        der = self.certificate.public_bytes(serialization.Encoding.DER)
        return [base64.b64encode(der).decode("ascii")]

    @property
    def kid(self) -> str:
        return libtrust_kid(self.key.public_key())


@dataclass(frozen=True)
class Pki:
    """Paths and keys of one session's test PKI."""

    ca_path: Path
    server_cert_path: Path
    server_key_path: Path
    signer: SigningIdentity
    rogue: SigningIdentity

    @classmethod
    def generate(cls, directory: Path) -> Pki:
        """Write ``ca.pem``, ``server.pem``/``server.key``, ``issuer.pem``, ``rogue.pem``."""
        directory.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = _ca_certificate(ca_key, now)
        server_key = ec.generate_private_key(ec.SECP256R1())
        server_cert = _server_certificate(server_key, ca_key, ca_cert, now)
        ca_path = _write(directory / "ca.pem", _pem(ca_cert))
        server_cert_path = _write(directory / "server.pem", _pem(server_cert))
        server_key_path = _write(directory / "server.key", _key_pem(server_key))
        return cls(
            ca_path=ca_path,
            server_cert_path=server_cert_path,
            server_key_path=server_key_path,
            signer=_signing_identity(directory / "issuer.pem", ISSUER_NAME, now),
            rogue=_signing_identity(directory / "rogue.pem", "npa-test-rogue", now),
        )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ca_certificate(key: ec.EllipticCurvePrivateKey, now: datetime.datetime) -> x509.Certificate:
    public = key.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(_name("npa-test-ca"))
        .issuer_name(_name("npa-test-ca"))
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


def _server_certificate(
    key: ec.EllipticCurvePrivateKey,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    now: datetime.datetime,
) -> x509.Certificate:
    san = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    return (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(san, critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )


def _signing_identity(path: Path, common_name: str, now: datetime.datetime) -> SigningIdentity:
    # Self-signed: distribution accepts the bundle certificate itself as x5c[0] (registry.md §5.3).
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return SigningIdentity(key=key, certificate=cert, cert_path=_write(path, _pem(cert)))


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
