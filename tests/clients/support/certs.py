"""Test certificates, made with the `cryptography` package: a CA, the broker's certificate
(127.0.0.1 and localhost), a client certificate (CN=client1,OU=eng,O=ringlog), an expired one, and
one from a CA the broker does not trust. Used by the TLS tests and scripts/bench/bench-security.py."""
import datetime
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(**attrs):
    oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in attrs.items()])


def _cert(subject, key, issuer, issuer_key, *, ca=False, server=False, days=(-1, 30)):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(now + datetime.timedelta(days=days[0]))
         .not_valid_after(now + datetime.timedelta(days=days[1]))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                          content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False,
                                          encipher_only=False, decipher_only=False), critical=True)
    else:
        eku = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        b = b.add_extension(x509.ExtendedKeyUsage([eku]), critical=False)
    if server:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                         x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                            critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_cert(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def make_certs(directory):
    """Writes the CA, the broker's key and chain, and the client certificates into
    `directory`; returns their paths by name (ca, broker.pem, client.crt, client.key, ...)."""
    from pathlib import Path
    d = Path(directory)
    ca_key, other_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name, other_name = _name(CN="ringlog test CA"), _name(CN="some other CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    other_ca = _cert(other_name, other_key, other_name, other_key, ca=True)
    files = {"ca": d / "ca.pem"}
    files["ca"].write_bytes(_pem_cert(ca))
    # A CA that signed none of the broker's certificates: a client trusting only it must refuse.
    files["other-ca"] = d / "other-ca.pem"
    files["other-ca"].write_bytes(_pem_cert(other_ca))
    made = {
        # name: (subject, issuer, issuer key, server?, validity days)
        "broker": (_name(CN="localhost"), ca_name, ca_key, True, (-1, 30)),
        "client": (_name(O="ringlog", OU="eng", CN="client1"), ca_name, ca_key, False, (-1, 30)),
        "expired": (_name(CN="expired-client"), ca_name, ca_key, False, (-30, -1)),
        "untrusted": (_name(CN="untrusted-client"), other_name, other_key, False, (-1, 30)),
    }
    for name, (subject, issuer, issuer_key, server, days) in made.items():
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(subject, key, issuer, issuer_key, server=server, days=days)
        files[name + ".key"] = d / f"{name}.key"
        files[name + ".key"].write_bytes(_pem_key(key))
        files[name + ".crt"] = d / f"{name}.crt"
        files[name + ".crt"].write_bytes(_pem_cert(cert))
        # key and chain in one file: the broker's ssl.keystore.location, Java's PEM key store
        files[name + ".pem"] = d / f"{name}.pem"
        files[name + ".pem"].write_bytes(_pem_key(key) + _pem_cert(cert))
    return {k: str(v) for k, v in files.items()}
