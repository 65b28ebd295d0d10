// Prints the partition the Java client (kafka-clients) picks for keys key-0..key-(N-1) and each
// partition count given, one "key partitions partition" line each. Run as a single-file
// source program by murmur2_java.rs.
import java.nio.charset.StandardCharsets;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;

public class PartitionsFromJava {
    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < n; i++) {
            String key = "key-" + i + (i % 7 == 0 ? "-" + "x".repeat(i % 13) : "");
            for (int a = 1; a < args.length; a++) {
                int parts = Integer.parseInt(args[a]);
                byte[] bytes = key.getBytes(StandardCharsets.UTF_8);
                out.append(key).append(' ').append(parts).append(' ')
                   .append(BuiltInPartitioner.partitionForKey(bytes, parts)).append('\n');
            }
        }
        System.out.print(out);
    }
}
