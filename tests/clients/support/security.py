"""A broker with every way in secured: SASL_SSL (SCRAM), SSL with client certificates required,
and PLAINTEXT, and its SCRAM-SHA-512 user admin (`secure_broker`, `ADMIN_PASSWORD`)."""
from support.broker import Broker, free_port_block

ADMIN_PASSWORD = "admin-Secret,with=odd chars"


def secure_broker(certs, extra=None, shards=2):
    """A broker with SASL_SSL, SSL (client certificates required) and PLAINTEXT listeners and the
    SCRAM-SHA-512 user admin, created at start."""
    b = Broker(shards=shards)
    b.sasl_ssl, b.ssl = free_port_block(shards), free_port_block(shards)
    while abs(b.ssl - b.sasl_ssl) < shards or min(abs(b.ssl - b.port), abs(b.sasl_ssl - b.port)) < shards:
        b.ssl = free_port_block(shards)
    b.extra_ports = [b.sasl_ssl, b.ssl]
    b.settings.update({
        "listeners": f"SASL_SSL://127.0.0.1:{b.sasl_ssl},SSL://127.0.0.1:{b.ssl},PLAINTEXT://127.0.0.1:{b.port}",
        "ssl.keystore.location": certs["broker.pem"],
        "ssl.truststore.location": certs["ca"],
        "ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        **(extra or {}),
    })
    b.serve_args = ["--add-scram", f"SCRAM-SHA-512=[name=admin,password={ADMIN_PASSWORD}]"]
    b.env = {"RUST_LOG": "info,node::server::authenticate=debug"}
    return b.start()
