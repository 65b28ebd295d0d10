"""Fixtures for client compatibility tests: start the real `ringlog` binary on loopback with a
fresh data dir and free ports, and stop it afterwards. Tests talk to it with real Kafka clients.

The helpers themselves (Broker, Apache Kafka, etcd, ...) live in the `support` package beside
this file; see support/README.md.
"""
import os
import sys

import pytest

# Test modules in the subfolders import `support` from this folder: put it on sys.path whatever
# pytest's import mode (the default, prepend, would also insert it for this conftest.py).
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from support.broker import Broker  # noqa: E402


@pytest.fixture
def broker():
    b = Broker().start()
    yield b
    b.cleanup()


@pytest.fixture
def make_broker():
    made = []

    def make(**kw):
        b = Broker(**kw)
        made.append(b)
        return b

    yield make
    for b in made:
        b.cleanup()
