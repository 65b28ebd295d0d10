"""Helpers shared by the client compatibility tests (tests/clients/): starting ringlog, Apache
Kafka and etcd, the Kafka client programs, hand-made wire requests, stored batches, test
certificates, metrics and waiting. Import the module you need, e.g.
`from support.broker import Broker`. No tests live here; the fixtures are in ../conftest.py."""
