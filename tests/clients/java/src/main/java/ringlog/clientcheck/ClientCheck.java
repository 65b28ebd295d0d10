package ringlog.clientcheck;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Checks the Apache Kafka Java client against a ringlog node:
 * Admin createTopics/describeTopics/describeCluster, an idempotent KafkaProducer per codec
 * (none, gzip, snappy, lz4, zstd) with keyed/unkeyed records, null values, headers (null
 * header values, repeated header keys) and explicit timestamps, then a group-less KafkaConsumer
 * with assign() + seekToBeginning() that reads everything back and compares every field.
 *
 * Usage: ClientCheck BOOTSTRAP [TOPIC]. Exit 0 when everything matched, 1 on a mismatch, 2 on
 * an exception. ClientCheck groups BOOTSTRAP [TOPIC] runs the consumer-group checks instead
 * (GroupCheck); ClientCheck migrate BOOTSTRAP [TOPIC] a group's online migration between the
 * classic and consumer protocols (MigrationCheck).
 */
public final class ClientCheck {
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final int PARTITIONS = 4;
    static final int PER_CODEC = 250;
    static final long BASE_TS = 1_700_000_000_000L;

    /** Where the producer says a record went. */
    record At(int partition, long offset) {}

    record Sent(byte[] key, byte[] value, List<Header> headers, long ts, String codec, int seq) {}

    static final class Mismatch extends RuntimeException {
        Mismatch(String msg) {
            super(msg);
        }
    }

    /** A check's body: returns the OK line's text. */
    interface Body {
        String run() throws Exception;
    }

    /**
     * Runs a check and exits: 0 with "OK: ..." when it returns, 1 on a mismatch, 2 on any
     * other error.
     */
    static void runAndExit(Body body) {
        try {
            System.out.println("OK: " + body.run());
            System.out.flush();
            System.exit(0);
        } catch (Mismatch m) {
            System.err.println("MISMATCH: " + m.getMessage());
            System.exit(1);
        } catch (Throwable t) {
            System.err.println("ERROR: " + t);
            t.printStackTrace();
            System.exit(2);
        }
    }

    /** An admin client with the timeouts every check uses. */
    static Admin openAdmin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 20_000);
        return Admin.create(p);
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new Mismatch(what);
        }
    }

    static byte[] utf8(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    static String show(byte[] b) {
        return b == null ? "null" : "\"" + new String(b, StandardCharsets.UTF_8) + "\"";
    }

    static String show(Iterable<Header> hs) {
        List<String> out = new ArrayList<>();
        for (Header h : hs) {
            out.add(h.key() + "=" + show(h.value()));
        }
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("groups")) {
            GroupCheck.main(Arrays.copyOfRange(args, 1, args.length));
            return;
        }
        if (args.length > 0 && args[0].equals("migrate")) {
            MigrationCheck.main(Arrays.copyOfRange(args, 1, args.length));
            return;
        }
        if (args.length > 0 && args[0].equals("streams-wordcount")) {
            StreamsWordCount.main(Arrays.copyOfRange(args, 1, args.length));
            return;
        }
        if (args.length > 0 && args[0].equals("chaos-produce")) {
            ChaosProducer.main(Arrays.copyOfRange(args, 1, args.length));
            return;
        }
        if (args.length < 1) {
            System.err.println("usage: ClientCheck BOOTSTRAP [TOPIC] | ClientCheck groups BOOTSTRAP [TOPIC]");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args.length > 1 ? args[1] : "java-codecs";
        long start = System.nanoTime();
        runAndExit(() -> {
            admin(bootstrap, topic);
            Map<At, Sent> sent = new HashMap<>();
            for (int c = 0; c < CODECS.length; c++) {
                produce(bootstrap, topic, c, sent);
            }
            int consumed = consume(bootstrap, topic, sent);
            return String.format("%d records in %d codecs over %d partitions verified in %d ms",
                    consumed, CODECS.length, PARTITIONS, (System.nanoTime() - start) / 1_000_000);
        });
    }

    static void admin(String bootstrap, String topic) throws Exception {
        try (Admin admin = openAdmin(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(20, TimeUnit.SECONDS);
            try {
                admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(20, TimeUnit.SECONDS);
                throw new Mismatch("creating " + topic + " a second time succeeded");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof TopicExistsException,
                        "second createTopics: expected TopicExistsException, got " + e.getCause());
            }
            Set<Integer> ids = admin.describeCluster().nodes().get(20, TimeUnit.SECONDS).stream()
                    .map(Node::id).collect(Collectors.toCollection(TreeSet::new));
            check(ids.equals(Set.of(0, 1)), "describeCluster broker ids " + ids + ", expected [0, 1]");
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
                    .get(20, TimeUnit.SECONDS).get(topic);
            check(d != null, "describeTopics: no " + topic);
            check(d.partitions().size() == PARTITIONS,
                    "describeTopics: " + d.partitions().size() + " partitions, expected " + PARTITIONS);
            for (int i = 0; i < PARTITIONS; i++) {
                TopicPartitionInfo info = d.partitions().get(i);
                check(info.partition() == i, "describeTopics: partition " + info.partition() + " at index " + i);
                check(info.leader() != null && ids.contains(info.leader().id()),
                        "describeTopics: partition " + i + " leader " + info.leader());
            }
            Set<String> names = admin.listTopics().names().get(20, TimeUnit.SECONDS);
            check(names.contains(topic), "listTopics " + names + " lacks " + topic);
        }
    }

    static Sent record(int codecIndex, int i) {
        String codec = CODECS[codecIndex];
        byte[] key = i % 3 == 0 ? null : utf8("key-" + (i % 17));
        byte[] value = i % 50 == 49 ? null : utf8((codec + "-value-" + i + "-").repeat(1 + i % 7));
        List<Header> headers = new ArrayList<>();
        headers.add(new RecordHeader("h", utf8(Integer.toString(i))));
        headers.add(new RecordHeader("codec", utf8(codec)));
        if (i % 10 == 0) {
            headers.add(new RecordHeader("nullvalue", null));
        }
        if (i % 25 == 0) {
            headers.add(new RecordHeader("h", utf8("repeated")));
        }
        long ts = BASE_TS + 1000L * i + codecIndex;
        return new Sent(key, value, headers, ts, codec, i);
    }

    static void produce(String bootstrap, String topic, int codecIndex, Map<At, Sent> out) throws Exception {
        String codec = CODECS[codecIndex];
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true); // the default; explicit so a missing InitProducerId fails loudly
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 20_000);
        List<Sent> records = new ArrayList<>();
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < PER_CODEC; i++) {
                Sent s = record(codecIndex, i);
                records.add(s);
                futures.add(producer.send(new ProducerRecord<>(topic, null, s.ts(), s.key(), s.value(), s.headers())));
            }
            producer.flush();
            for (int i = 0; i < PER_CODEC; i++) {
                RecordMetadata md = futures.get(i).get(30, TimeUnit.SECONDS);
                Sent s = records.get(i);
                String where = codec + " record " + i + " acked at " + md;
                check(md.topic().equals(topic), where + ": topic");
                check(md.partition() >= 0 && md.partition() < PARTITIONS, where + ": partition");
                check(md.offset() >= 0, where + ": offset");
                check(md.timestamp() == s.ts(), where + ": timestamp " + md.timestamp() + " != " + s.ts());
                Sent prev = out.put(new At(md.partition(), md.offset()), s);
                check(prev == null, where + ": offset handed out twice (also " + prev + ")");
            }
        }
    }

    static int consume(String bootstrap, String topic, Map<At, Sent> sent) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 200);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 20_000);
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < PARTITIONS; i++) {
            tps.add(new TopicPartition(topic, i));
        }
        Map<Integer, Long> perPartition = new HashMap<>();
        for (At k : sent.keySet()) {
            perPartition.merge(k.partition(), 1L, Long::sum);
        }
        int total = sent.size();
        check(total == PER_CODEC * CODECS.length, "acked " + total + " records");
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(tps);
            Map<TopicPartition, Long> begin = consumer.beginningOffsets(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            for (TopicPartition tp : tps) {
                check(begin.get(tp) == 0L, "beginningOffsets " + tp + " = " + begin.get(tp));
                long want = perPartition.getOrDefault(tp.partition(), 0L);
                check(end.get(tp) == want, "endOffsets " + tp + " = " + end.get(tp) + ", acked " + want);
            }
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < total && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(500)).forEach(got::add);
            }
            check(got.size() == total, "consumed " + got.size() + " of " + total + " records within 30 s");
            check(consumer.poll(Duration.ofMillis(500)).isEmpty(), "records beyond the acknowledged ones");
            for (TopicPartition tp : tps) {
                check(consumer.position(tp) == end.get(tp), "position " + tp + " = " + consumer.position(tp));
            }
        }

        Map<Integer, Long> next = new HashMap<>();
        Map<String, Integer> lastSeq = new HashMap<>();
        Map<String, Set<Integer>> keyPartitions = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : got) {
            String where = "record " + r.topic() + "-" + r.partition() + "@" + r.offset();
            check(r.topic().equals(topic), where + ": topic");
            long want = next.getOrDefault(r.partition(), 0L);
            check(r.offset() == want, where + ": expected offset " + want + " next in this partition");
            next.put(r.partition(), want + 1);
            Sent s = sent.get(new At(r.partition(), r.offset()));
            check(s != null, where + ": not acknowledged by the producer");
            check(Arrays.equals(r.key(), s.key()), where + ": key " + show(r.key()) + " != " + show(s.key()));
            check(Arrays.equals(r.value(), s.value()), where + ": value " + show(r.value()) + " != " + show(s.value()));
            check(r.timestamp() == s.ts(), where + ": timestamp " + r.timestamp() + " != " + s.ts());
            check(r.timestampType() == TimestampType.CREATE_TIME, where + ": timestamp type " + r.timestampType());
            Header[] hs = r.headers().toArray();
            boolean same = hs.length == s.headers().size();
            for (int i = 0; same && i < hs.length; i++) {
                same = hs[i].key().equals(s.headers().get(i).key())
                        && Arrays.equals(hs[i].value(), s.headers().get(i).value());
            }
            check(same, where + ": headers " + show(r.headers()) + " != " + show(s.headers()));
            // producer order is kept per partition (idempotent producer, one codec at a time)
            String seqKey = r.partition() + "/" + s.codec();
            check(s.seq() > lastSeq.getOrDefault(seqKey, -1),
                    where + ": " + s.codec() + " record " + s.seq() + " after " + lastSeq.get(seqKey));
            lastSeq.put(seqKey, s.seq());
            if (s.key() != null) {
                keyPartitions.computeIfAbsent(show(s.key()), k -> new HashSet<>()).add(r.partition());
            }
        }
        for (Map.Entry<String, Set<Integer>> e : keyPartitions.entrySet()) {
            check(e.getValue().size() == 1, "key " + e.getKey() + " in partitions " + e.getValue());
        }
        check(next.keySet().size() == PARTITIONS, "records in partitions " + next.keySet() + " only");
        return got.size();
    }
}
