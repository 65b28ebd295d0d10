"""The broker's log output when a program, not a person, reads it: no terminal colour codes
when stderr is a file, and one JSON object per line with `--log-format json`."""
import json

from confluent_kafka import Producer

from support.broker import Broker


def run_and_read_log(b):
    """Starts `b`, produces one record (auto-creating a topic), stops it; its whole log."""
    b.start()
    try:
        p = Producer({"bootstrap.servers": b.bootstrap})
        p.produce("logged", value=b"x")
        assert p.flush(15) == 0
    finally:
        b.stop()
        with open(b.log_path, encoding="utf-8") as f:
            log = f.read()
        b.cleanup()
    return log


def test_text_logs_to_a_file_carry_no_colour_codes():
    log = run_and_read_log(Broker(shards=1))
    assert "listening" in log and "broker_id=0" in log, log
    assert "\x1b[" not in log, log[:500]


def test_json_logs_are_one_object_per_line():
    b = Broker(shards=1)
    b.global_args = ["--log-format", "json"]
    lines = [l for l in run_and_read_log(b).splitlines() if l.strip()]
    records = [json.loads(l) for l in lines]  # every line parses
    assert all({"timestamp", "level", "fields"} <= r.keys() for r in records), lines[:3]
    listening = [r for r in records if r["fields"].get("message") == "listening"]
    assert listening and listening[0]["fields"]["broker_id"] == 0, lines[:5]
