"""Client processes for the kill -9 chaos test (test_chaos_kill9.py), run as their own
processes so they live on while the broker is killed and restarted under them.

  python3 chaos_clients.py produce BOOTSTRAP TOPIC NAME IDEMPOTENT(0|1) SECONDS
      confluent-kafka producer: values NAME-SEQ, a trickle (one record every few
      milliseconds) alternating with bursts; prints "ACK partition offset value" for every
      record the broker acknowledged. Idempotent producers use acks=all (librdkafka requires
      it; on one replica it waits for what acks=1 waits for), the others acks=1. Stops after
      SECONDS or when its stdin closes, flushing what it sent.
  python3 chaos_clients.py consume BOOTSTRAP TOPIC PARTITIONS
      confluent-kafka consumer assigned every partition from offset 0; prints
      "SEEN partition offset value" for every record it receives, until SIGTERM.
"""
import signal
import sys
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def produce(bootstrap, topic, name, idempotent, seconds):
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": idempotent,
        "acks": "all" if idempotent else "1",
        "linger.ms": 2,
        "message.timeout.ms": 120000,
        "socket.timeout.ms": 10000,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 200,
        "retry.backoff.ms": 50,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    p = Producer(conf)
    acked = [0]

    def delivered(err, msg):
        if err is None:
            out(f"ACK {msg.partition()} {msg.offset()} {msg.value().decode()}")
            acked[0] += 1

    stop = [False]

    def watch_stdin():
        sys.stdin.read()
        stop[0] = True

    threading.Thread(target=watch_stdin, daemon=True).start()
    deadline = time.time() + seconds
    seq = 0
    while time.time() < deadline and not stop[0]:
        burst = (seq // 300) % 2 == 1
        for _ in range(300 if burst else 60):
            while True:
                try:
                    p.produce(topic, value=f"{name}-{seq}".encode(), on_delivery=delivered)
                    break
                except BufferError:
                    p.poll(0.05)
            seq += 1
            p.poll(0)
            if not burst:
                time.sleep(0.005)
        if burst:
            p.poll(0.3)
    left = p.flush(60)
    print(f"sent {seq}, acknowledged {acked[0]}, undelivered {left}", file=sys.stderr)


def consume(bootstrap, topic, partitions):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "chaos-observer",
        "enable.auto.commit": False,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 200,
        "fetch.wait.max.ms": 100,
    })
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    while not stop[0]:
        m = c.poll(0.1)
        if m is None or m.error():
            continue
        out(f"SEEN {m.partition()} {m.offset()} {m.value().decode()}")
    c.close()


if __name__ == "__main__":
    if sys.argv[1] == "produce":
        produce(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1", float(sys.argv[6]))
    elif sys.argv[1] == "consume":
        consume(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(f"unknown command {sys.argv[1]}")
