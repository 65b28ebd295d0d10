"""Topics created and deleted at run time under load (issue 12): while a producer and a consumer
keep a steady topic busy, ten rounds each create a topic of 50 partitions, produce to it and
read it back, then delete it. Every round's records come back, a deleted topic's folders leave
the data dir and its name is refused by produce, the steady traffic keeps being acknowledged
during every round (progress, not timings), and at the end every acknowledged steady record is
served at its offset.
"""
import os
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.waiting import wait_for

ROUNDS = 10
CHURN_PARTITIONS = 50
CHURN_RECORDS = 200
STEADY_PARTITIONS = 4


def read_partitions(bootstrap, topic, partitions, count, group):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = {}
    deadline = time.time() + 60
    while len(got) < count and time.time() < deadline:
        for m in c.consume(1000, timeout=0.5):
            assert m.error() is None, m.error()
            got[(m.partition(), m.offset())] = m.value()
    c.close()
    return got


def test_topics_created_and_deleted_under_load(make_broker):
    b = make_broker(shards=2).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("steady", STEADY_PARTITIONS, 1)])["steady"].result(timeout=30)

    acked, failed = {}, []
    stop = threading.Event()

    def on_steady(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()
        else:
            failed.append(err)

    def produce_steadily():
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 2,
                      "enable.idempotence": True})
        i = 0
        while not stop.is_set():
            p.produce("steady", value=b"steady-%09d" % i, on_delivery=on_steady)
            i += 1
            if i % 100 == 0:
                p.poll(0)
                time.sleep(0.01)
        p.flush(30)

    steady = threading.Thread(target=produce_steadily)
    steady.start()
    try:
        wait_for("the steady producer's first acknowledgements", lambda: len(acked) > 100, timeout=60)
        for r in range(ROUNDS):
            before = len(acked)
            name = f"churn-{r}"
            admin.create_topics([NewTopic(name, CHURN_PARTITIONS, 1)])[name].result(timeout=30)
            p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "linger.ms": 5})
            for i in range(CHURN_RECORDS):
                p.produce(name, value=b"%s-%05d" % (name.encode(), i), partition=i % CHURN_PARTITIONS)
            assert p.flush(30) == 0, f"{name}: records unacknowledged"
            got = read_partitions(b.bootstrap, name, CHURN_PARTITIONS, CHURN_RECORDS, f"g-{name}")
            values = sorted(got.values())
            assert values == sorted(b"%s-%05d" % (name.encode(), i) for i in range(CHURN_RECORDS)), \
                f"{name}: {len(values)} of {CHURN_RECORDS} records read back"
            admin.delete_topics([name])[name].result(timeout=30)
            wait_for(f"{name}'s folders removed",
                     lambda: not any(d.startswith(name + "-") for d in os.listdir(b.data_dir)), timeout=60)
            # Produce to the deleted topic is refused (librdkafka reports it unknown).
            errs = []
            p2 = Producer({"bootstrap.servers": b.bootstrap, "acks": 1,
                           "message.timeout.ms": 3000, "allow.auto.create.topics": False})
            p2.produce(name, value=b"late", partition=0, on_delivery=lambda e, m: errs.append(e))
            p2.flush(10)
            assert errs and errs[0] is not None, f"{name}: produce after delete was acknowledged"
            wait_for(f"steady acknowledgements during round {r}", lambda: len(acked) > before + 50, timeout=60)
    finally:
        stop.set()
        steady.join(60)
    assert not failed, failed[:3]
    got = read_partitions(b.bootstrap, "steady", STEADY_PARTITIONS, len(acked), "g-steady")
    missing = [k for k, v in acked.items() if got.get(k) != v]
    assert not missing, f"{len(missing)} acknowledged steady records not served, e.g. {missing[:3]}"
    assert b.proc.poll() is None
    print(f"{ROUNDS} topics created and deleted; {len(acked)} steady records acknowledged and read")
