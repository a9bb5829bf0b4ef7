"""The testbed's certificates: a CA, the apiserver's serving cert, an admin client cert in
`system:masters`, and the service-account signing key pair. Made once per state folder."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVICE_IP = "10.96.0.1"  # first address of the service CIDR: the `kubernetes` Service
_VALID = dt.timedelta(days=3650)


@dataclass(frozen=True)
class Pki:
    dir: Path

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def apiserver_cert(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.dir / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.dir / "admin.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(path: Path, key: rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                          serialization.NoEncryption())
    )
    path.chmod(0o600)


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _sign(
    subject: x509.Name,
    key: rsa.RSAPrivateKey,
    issuer: x509.Name,
    issuer_key: rsa.RSAPrivateKey,
    *,
    ca: bool = False,
    usage: x509.ObjectIdentifier | None = None,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALID)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False),
            critical=True,
        )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def ensure(directory: Path, advertise_address: str) -> Pki:
    """Create the PKI in `directory` unless it is already there."""
    pki = Pki(directory)
    if all(p.is_file() for p in (pki.ca_cert, pki.apiserver_cert, pki.admin_cert, pki.sa_key, pki.sa_pub)):
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name("kilocard-testbed-ca")
    _write_key(directory / "ca.key", ca_key)
    _write_cert(pki.ca_cert, _sign(ca_name, ca_key, ca_name, ca_key, ca=True))

    server_key = _key()
    sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address(ip)) for ip in {"127.0.0.1", SERVICE_IP, advertise_address}
    ]
    sans += [x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                       "kubernetes.default.svc.cluster.local")]
    _write_key(pki.apiserver_key, server_key)
    _write_cert(pki.apiserver_cert, _sign(_name("kube-apiserver"), server_key, ca_name, ca_key,
                                          usage=ExtendedKeyUsageOID.SERVER_AUTH, sans=sans))

    admin_key = _key()
    _write_key(pki.admin_key, admin_key)
    _write_cert(pki.admin_cert, _sign(_name("kilocard-testbed-admin", "system:masters"), admin_key, ca_name,
                                      ca_key, usage=ExtendedKeyUsageOID.CLIENT_AUTH))

    sa_key = _key()
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pki


def serving(directory: Path, dns_name: str) -> tuple[Path, Path, Path]:
    """A fresh CA and a server certificate it signed for `dns_name` (a node agent's name, which
    every caller checks whatever address it dials): (ca.crt, tls.crt, tls.key), as in the
    Secret kilocard-agent-tls."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, key = _key(), _key()
    ca_name = _name(f"{dns_name}-ca")
    paths = directory / "ca.crt", directory / "tls.crt", directory / "tls.key"
    _write_cert(paths[0], _sign(ca_name, ca_key, ca_name, ca_key, ca=True))
    _write_cert(paths[1], _sign(_name(dns_name), key, ca_name, ca_key, usage=ExtendedKeyUsageOID.SERVER_AUTH,
                                sans=[x509.DNSName(dns_name)]))
    _write_key(paths[2], key)
    return paths
