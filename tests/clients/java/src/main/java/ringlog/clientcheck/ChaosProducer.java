package ringlog.clientcheck;

import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client's producer for the kill -9 chaos test (tests/clients/chaos/test_chaos_kill9.py):
 * sends values NAME-SEQ to TOPIC, alternating a trickle (one record every few milliseconds)
 * with bursts, while the broker is killed and restarted under it, and prints one line
 * "ACK partition offset value" for every record the broker acknowledged. Idempotent producers
 * use acks=all (Kafka requires it; on one replica it waits for what acks=1 waits for), the
 * others acks=1. Stops after SECONDS, or when its stdin closes, flushing what it has sent.
 *
 * Usage: ClientCheck chaos-produce BOOTSTRAP TOPIC NAME IDEMPOTENT(true|false) SECONDS
 */
public final class ChaosProducer {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: ClientCheck chaos-produce BOOTSTRAP TOPIC NAME IDEMPOTENT SECONDS");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1], name = args[2];
        boolean idempotent = Boolean.parseBoolean(args[3]);
        long deadline = System.nanoTime() + Long.parseLong(args[4]) * 1_000_000_000L;
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, idempotent);
        p.put(ProducerConfig.ACKS_CONFIG, idempotent ? "all" : "1");
        p.put(ProducerConfig.LINGER_MS_CONFIG, 2);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120_000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        p.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, 20);
        p.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 200);
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 50);
        p.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, 1000);
        AtomicLong acked = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // wait for end of input
                }
            } catch (java.io.IOException e) {
                // stop as well
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        long seq = 0;
        while (System.nanoTime() < deadline && !stop.get()) {
            boolean burst = (seq / 300) % 2 == 1;
            int n = burst ? 300 : 60;
            for (int i = 0; i < n; i++, seq++) {
                String value = name + "-" + seq;
                producer.send(new ProducerRecord<>(topic, null, value.getBytes(StandardCharsets.UTF_8)),
                        (md, err) -> {
                            if (err == null) {
                                synchronized (System.out) {
                                    System.out.println("ACK " + md.partition() + " " + md.offset() + " " + value);
                                    System.out.flush();
                                }
                                acked.incrementAndGet();
                            }
                        });
                if (!burst) {
                    Thread.sleep(5);
                }
            }
            if (burst) {
                Thread.sleep(300);
            }
        }
        producer.close(java.time.Duration.ofSeconds(60));
        System.err.println("sent " + seq + ", acknowledged " + acked.get());
        System.exit(0);
    }
}
