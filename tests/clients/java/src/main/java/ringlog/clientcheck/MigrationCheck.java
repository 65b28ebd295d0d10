package ringlog.clientcheck;

import static ringlog.clientcheck.ClientCheck.check;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Online migration of a consumer group between the classic and the consumer protocol (KIP-848)
 * with the Apache Kafka Java client, while records flow:
 *
 * <ol>
 * <li>two classic members (cooperative-sticky) share a {@value #PARTITIONS}-partition topic;</li>
 * <li>a {@code group.protocol=consumer} member joins: the group becomes a consumer group
 * (describeConsumerGroups says CONSUMER) and the coordinator's assignor moves partitions to it;</li>
 * <li>a classic member leaves and a second consumer-protocol member joins, then the other classic
 * member leaves;</li>
 * <li>a classic member joins the consumer group, then both consumer-protocol members leave: the group
 * is classic again (CLASSIC) and the classic member owns every partition.</li>
 * </ol>
 *
 * All members run in this process, so ownership is judged on one clock: a member owns a
 * partition from onPartitionsAssigned until onPartitionsRevoked/Lost (after its commitSync) or
 * its close; another member being given it in between is a failure. Every acknowledged record is
 * consumed (none skipped), and the group's committed offsets, sampled every 100 ms through the
 * Admin API, never go back.
 *
 * Usage: ClientCheck migrate BOOTSTRAP [TOPIC]. Exit 0 when everything held.
 */
public final class MigrationCheck {
    static final int PARTITIONS = 6;
    static final long WAIT_MS = 40_000;

    /** Who owns each partition now, by member name. */
    static final Map<Integer, String> OWNERS = new ConcurrentHashMap<>();
    static final List<String> VIOLATIONS = new CopyOnWriteArrayList<>();
    static final Set<String> CONSUMED = ConcurrentHashMap.newKeySet();
    static final Set<String> EVER_OWNED = ConcurrentHashMap.newKeySet();

    static synchronized void claim(String who, Collection<TopicPartition> parts) {
        for (TopicPartition tp : parts) {
            String before = OWNERS.putIfAbsent(tp.partition(), who);
            if (before != null && !before.equals(who)) {
                VIOLATIONS.add("partition " + tp.partition() + " given to " + who + " while " + before + " owns it");
            }
            EVER_OWNED.add(who);
        }
    }

    static synchronized void release(String who, Collection<TopicPartition> parts) {
        for (TopicPartition tp : parts) {
            OWNERS.remove(tp.partition(), who);
        }
    }

    /** One member: a KafkaConsumer on its own thread, committing after every poll. */
    static final class Member implements Runnable {
        final String name;
        final AtomicBoolean stop = new AtomicBoolean();
        final Thread thread;
        final Set<TopicPartition> owned = ConcurrentHashMap.newKeySet();
        final KafkaConsumer<String, String> consumer;
        final String topic;

        Member(String bootstrap, String group, String topic, String name, boolean classic) {
            this.name = name;
            this.topic = topic;
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, classic ? "classic" : "consumer");
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            if (classic) {
                p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
                p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6_000);
                p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 1_000);
            }
            consumer = new KafkaConsumer<>(p);
            thread = new Thread(this, name);
            thread.start();
        }

        @Override
        public void run() {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    try {
                        consumer.commitSync();
                    } catch (RuntimeException e) {
                        System.err.println(name + ": commit on revoke: " + e);
                    }
                    owned.removeAll(parts);
                    release(name, parts);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    owned.removeAll(parts);
                    release(name, parts);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    claim(name, parts);
                    owned.addAll(parts);
                }
            });
            try {
                while (!stop.get()) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                        CONSUMED.add(r.partition() + ":" + r.offset());
                    }
                    try {
                        consumer.commitSync();
                    } catch (RuntimeException e) {
                        // a rebalance in between: the records come again
                        System.err.println(name + ": commit: " + e);
                    }
                }
            } catch (RuntimeException e) {
                VIOLATIONS.add(name + " failed: " + e);
            } finally {
                consumer.close(); // leaves the group (revoking, which releases)
                release(name, new ArrayList<>(owned));
                owned.clear();
            }
        }

        void close() throws InterruptedException {
            stop.set(true);
            thread.join(30_000);
            check(!thread.isAlive(), name + " did not close");
        }
    }

    static void waitFor(String what, BooleanSupplier ok) throws InterruptedException {
        long end = System.currentTimeMillis() + WAIT_MS;
        while (!ok.getAsBoolean()) {
            if (System.currentTimeMillis() > end) {
                throw new ClientCheck.Mismatch("timed out waiting for " + what + "; owners " + OWNERS);
            }
            Thread.sleep(100);
        }
    }

    static GroupType type(Admin admin, String group) {
        try {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                .describedGroups().get(group).get(10, TimeUnit.SECONDS);
            return d.type();
        } catch (Exception e) {
            return GroupType.UNKNOWN;
        }
    }

    static boolean owns(Member... members) {
        Set<Integer> all = new HashSet<>();
        for (Member m : members) {
            if (m.owned.isEmpty()) {
                return false;
            }
            for (TopicPartition tp : m.owned) {
                all.add(tp.partition());
            }
        }
        return all.size() == PARTITIONS;
    }

    public static void main(String[] args) {
        ClientCheck.runAndExit(() -> run(args[0], args.length > 1 ? args[1] : "java-migrate"));
    }

    static String run(String bootstrap, String topic) throws Exception {
        String group = topic + "-group";
        try (Admin admin = ClientCheck.openAdmin(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(30, TimeUnit.SECONDS);
            Set<String> acked = ConcurrentHashMap.newKeySet();
            AtomicBoolean producing = new AtomicBoolean(true);
            Thread producer = new Thread(() -> produce(bootstrap, topic, acked, producing), "producer");
            producer.start();
            AtomicBoolean watching = new AtomicBoolean(true);
            Thread watch = new Thread(() -> watchCommitted(bootstrap, group, watching), "committed-watch");
            watch.start();

            Member c1 = new Member(bootstrap, group, topic, "classic-1", true);
            Member c2 = new Member(bootstrap, group, topic, "classic-2", true);
            waitFor("two classic members sharing the partitions", () -> owns(c1, c2));
            check(type(admin, group) == GroupType.CLASSIC, "a classic group first: " + type(admin, group));

            Member n1 = new Member(bootstrap, group, topic, "consumer-1", false);
            waitFor("the group upgraded", () -> type(admin, group) == GroupType.CONSUMER);
            waitFor("the consumer-protocol member given partitions", () -> owns(c1, c2, n1));
            c1.close();
            Member n2 = new Member(bootstrap, group, topic, "consumer-2", false);
            waitFor("three members sharing the partitions", () -> owns(c2, n1, n2));
            c2.close();
            waitFor("the consumer-protocol members owning everything", () -> owns(n1, n2));
            check(type(admin, group) == GroupType.CONSUMER, "still a consumer group: " + type(admin, group));

            Member c3 = new Member(bootstrap, group, topic, "classic-3", true);
            waitFor("a classic member in the consumer group", () -> owns(n1, n2, c3));
            n1.close();
            n2.close();
            waitFor("the group downgraded", () -> type(admin, group) == GroupType.CLASSIC);
            waitFor("the classic member owning everything", () -> owns(c3));

            producing.set(false);
            producer.join(30_000);
            waitFor("every acknowledged record consumed", () -> CONSUMED.containsAll(acked));
            c3.close();
            watching.set(false);
            watch.join(30_000);
            check(VIOLATIONS.isEmpty(), String.join("; ", VIOLATIONS));
            check(EVER_OWNED.equals(Set.of("classic-1", "classic-2", "consumer-1", "consumer-2", "classic-3")),
                "every member owned partitions at some time: " + EVER_OWNED);
            return acked.size() + " records consumed through classic -> consumer -> classic, "
                + "no partition owned twice, committed offsets never back";
        }
    }

    static void produce(String bootstrap, String topic, Set<String> acked, AtomicBoolean producing) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; producing.get(); i++) {
                producer.send(new ProducerRecord<>(topic, i % PARTITIONS, null, "v" + i), (md, e) -> {
                    if (e == null) {
                        acked.add(md.partition() + ":" + md.offset());
                    }
                });
                Thread.sleep(5);
            }
            producer.flush();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Samples the committed offsets; one going back is a violation. */
    static void watchCommitted(String bootstrap, String group, AtomicBoolean watching) {
        Map<Integer, Long> last = new HashMap<>();
        try (Admin admin = ClientCheck.openAdmin(bootstrap)) {
            while (watching.get()) {
                try {
                    Map<TopicPartition, OffsetAndMetadata> now = admin.listConsumerGroupOffsets(group)
                        .partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS);
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : now.entrySet()) {
                        if (e.getValue() == null) {
                            continue;
                        }
                        long o = e.getValue().offset();
                        Long before = last.put(e.getKey().partition(), o);
                        if (before != null && o < before) {
                            VIOLATIONS.add("committed offset of partition " + e.getKey().partition()
                                + " went back from " + before + " to " + o);
                        }
                    }
                } catch (Exception e) {
                    // the coordinator busy or moving: sample again
                }
                Thread.sleep(100);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
