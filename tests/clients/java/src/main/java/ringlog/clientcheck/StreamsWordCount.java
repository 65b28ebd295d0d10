package ringlog.clientcheck;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams application with {@code processing.guarantee=exactly_once_v2}: counts the
 * words of an input topic (one word per record, no key) into an output topic, word → count.
 * The records are repartitioned by word (a repartition topic) and counted in a state store
 * (a compacted changelog topic), so every commit is a transaction over the output, repartition
 * and changelog partitions and the input offsets. The record cache is off: every input word
 * gives one output record, so a word's outputs, read committed, are exactly 1, 2, …, n.
 *
 * <p>Runs until killed (SIGTERM closes it); prints its state changes. Usage:
 * {@code ClientCheck streams-wordcount BOOTSTRAP APPLICATION_ID INPUT OUTPUT}.
 */
public final class StreamsWordCount {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: ClientCheck streams-wordcount BOOTSTRAP APPLICATION_ID INPUT OUTPUT");
            System.exit(2);
        }
        String bootstrap = args[0];
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/ringlog-streams-" + ProcessHandle.current().pid());
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // Failover takes a lease (seconds): let requests and transactions ride it out.
        props.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 30000);
        props.put(StreamsConfig.producerPrefix(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG), 60000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 30000);
        props.put(StreamsConfig.TASK_TIMEOUT_MS_CONFIG, 120000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
                .groupBy((k, word) -> word, Grouped.with("by-word", Serdes.String(), Serdes.String()))
                .count()
                .toStream()
                .mapValues(n -> Long.toString(n))
                .to(args[3], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> System.out.println("state " + before + " -> " + now));
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("uncaught: " + e);
            // A thread that failed (a broker killed under it) is replaced; its task resumes
            // from the last committed transaction.
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }
}
