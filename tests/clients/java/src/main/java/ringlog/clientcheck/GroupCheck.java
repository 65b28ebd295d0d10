package ringlog.clientcheck;

import static ringlog.clientcheck.ClientCheck.check;

import ringlog.clientcheck.ClientCheck.At;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Checks the classic consumer-group protocol of a ringlog node with the Apache Kafka Java client
 * (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
 * ListGroups, DescribeGroups, DeleteGroups):
 *
 * <ol>
 * <li>Admin creates a {@value #PARTITIONS}-partition topic; a producer writes {@value #RECORDS} keyed
 * records.</li>
 * <li>{@value #MEMBERS} KafkaConsumers subscribe() in one group (manual commitSync after each
 * processed poll and on revocation), each on its own thread, started one after the other (each
 * join a rebalance). Their partitions stay paused until all {@value #MEMBERS} report the same
 * generation with a complete, disjoint assignment, so the work is really shared. In every generation a partition is owned by at most one member, in the
 * final one by exactly one; every record is consumed exactly once, in offset order, by the member
 * owning its partition. describeConsumerGroups (Stable, range, {@value #MEMBERS} members with the
 * assignments the consumers saw) while they run.</li>
 * <li>After close (LeaveGroup): listConsumerGroupOffsets equals each partition's end offset (sum
 * {@value #RECORDS}), describeConsumerGroups says Empty with no members, listGroups lists it,
 * deleteConsumerGroups removes it.</li>
 * <li>Static membership: members static-1 and static-2 split the partitions; static-1 closes
 * (a static Java member sends no LeaveGroup), the group still lists it; a new consumer with
 * group.instance.id static-1 gets a new member id and the same partitions, static-2 keeps its
 * own; deleting the group (static members still in it) fails with GroupNotEmptyException.</li>
 * </ol>
 *
 * Usage: ClientCheck groups BOOTSTRAP [TOPIC]. Exit 0 when everything matched, 1 on a mismatch,
 * 2 on an exception.
 */
public final class GroupCheck {
    static final int PARTITIONS = 6;
    static final int RECORDS = 600;
    static final int MEMBERS = 3;
    static final long TIMEOUT_MS = 30_000;


    /** One record as a member saw it. */
    record Got(int member, int generation, int partition, long offset, String key, String value) {}

    public static void main(String[] args) {
        if (args.length < 1) {
            System.err.println("usage: ClientCheck groups BOOTSTRAP [TOPIC]");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args.length > 1 ? args[1] : "java-groups";
        long start = System.nanoTime();
        ClientCheck.runAndExit(() -> {
            try (Admin admin = ClientCheck.openAdmin(bootstrap)) {
                admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(20, TimeUnit.SECONDS);
                Map<At, Integer> sent = produce(bootstrap, topic);
                String shared = sharedGroup(admin, bootstrap, topic, sent);
                String stat = staticGroup(admin, bootstrap, topic);
                return String.format("%d records consumed exactly once by %d members of %s over %d partitions, "
                                + "committed offsets sum to %d; static member rejoin in %s kept its partitions; %d ms",
                        RECORDS, MEMBERS, shared, PARTITIONS, RECORDS, stat, (System.nanoTime() - start) / 1_000_000);
            }
        });
    }

    static String key(int i) {
        return "key-" + i;
    }

    static String value(int i) {
        return "value-" + i;
    }

    /** Produces RECORDS keyed records; returns where each one went. */
    static Map<At, Integer> produce(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 20_000);
        Map<At, Integer> out = new HashMap<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < RECORDS; i++) {
                fs.add(producer.send(new ProducerRecord<>(topic, key(i), value(i))));
            }
            producer.flush();
            for (int i = 0; i < RECORDS; i++) {
                RecordMetadata md = fs.get(i).get(30, TimeUnit.SECONDS);
                Integer prev = out.put(new At(md.partition(), md.offset()), i);
                check(prev == null, "record " + i + " acked at " + md + ", like record " + prev);
            }
        }
        Set<Integer> used = out.keySet().stream().map(At::partition).collect(Collectors.toCollection(TreeSet::new));
        check(used.size() == PARTITIONS, "the " + RECORDS + " keyed records went to partitions " + used + " only");
        return out;
    }

    static Properties consumerProps(String bootstrap, String group, String clientId) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 200);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 30_000);
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 1_000);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 20_000);
        return p;
    }

    /**
     * A KafkaConsumer in a group, polling on its own thread until stopped, then closed. Everything
     * it sees (assignments per generation, records) is recorded for the checks.
     */
    static final class Member implements Runnable {
        final int index;
        final String name;
        final Properties props;
        final String topic;
        /** While it is false, newly assigned partitions are paused (no records are returned). */
        final BooleanSupplier consume;
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final Thread thread;
        // guarded by this
        final Map<Integer, Set<TopicPartition>> assignedIn = new TreeMap<>();
        final List<Got> got = new ArrayList<>();
        int generation = -1;
        String memberId = "";
        Set<TopicPartition> assignment = Set.of();
        int assignments;

        Member(int index, String name, Properties props, String topic, BooleanSupplier consume) {
            this.index = index;
            this.name = name;
            this.props = props;
            this.topic = topic;
            this.consume = consume;
            this.thread = new Thread(this, name);
            this.thread.setDaemon(true);
        }

        Member start() {
            thread.start();
            return this;
        }

        synchronized int generation() {
            return generation;
        }

        synchronized Set<TopicPartition> assignment() {
            return assignment;
        }

        synchronized String memberId() {
            return memberId;
        }

        synchronized int assignments() {
            return assignments;
        }

        synchronized List<Got> got() {
            return new ArrayList<>(got);
        }

        synchronized Map<Integer, Set<TopicPartition>> assignedIn() {
            return new TreeMap<>(assignedIn);
        }

        @Override
        public void run() {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(props)) {
                c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                        // everything returned by earlier polls has been processed: commit it before
                        // another member can get these partitions
                        if (!partitions.isEmpty()) {
                            c.commitSync();
                        }
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                        // Once the members are told to stop, the first to leave starts another
                        // rebalance the others may complete before they see the flag: that
                        // generation is shutdown churn, not the group's final one.
                        if (stop.get()) {
                            return;
                        }
                        int gen = c.groupMetadata().generationId();
                        synchronized (Member.this) {
                            assignedIn.computeIfAbsent(gen, g -> new HashSet<>()).addAll(partitions);
                            assignments++;
                        }
                        if (!consume.getAsBoolean()) {
                            c.pause(partitions);
                        }
                    }
                });
                while (!stop.get()) {
                    ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(100));
                    int gen = c.groupMetadata().generationId();
                    synchronized (this) {
                        for (ConsumerRecord<String, String> r : recs) {
                            got.add(new Got(index, gen, r.partition(), r.offset(), r.key(), r.value()));
                        }
                        generation = gen;
                        memberId = c.groupMetadata().memberId();
                        assignment = Set.copyOf(c.assignment());
                    }
                    if (!recs.isEmpty()) {
                        c.commitSync();
                    }
                    if (!c.paused().isEmpty() && consume.getAsBoolean()) {
                        c.resume(c.paused());
                    }
                }
                c.close(Duration.ofSeconds(15));
            } catch (Throwable t) {
                failure.set(t);
            }
        }

        void stopAndJoin() throws InterruptedException {
            stop.set(true);
            thread.join(25_000);
            check(!thread.isAlive(), name + " did not close within 25 s");
            Throwable t = failure.get();
            if (t != null) {
                throw new RuntimeException(name + " failed: " + t, t);
            }
        }
    }

    static void await(String what, BooleanSupplier cond, List<Member> members, Admin admin, String group)
            throws Exception {
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        while (!cond.getAsBoolean()) {
            for (Member m : members) {
                Throwable t = m.failure.get();
                if (t != null) {
                    throw new RuntimeException(m.name + " failed while waiting for " + what + ": " + t, t);
                }
            }
            if (System.currentTimeMillis() > deadline) {
                StringBuilder sb = new StringBuilder("timed out after " + TIMEOUT_MS + " ms waiting for " + what);
                for (Member m : members) {
                    sb.append("\n  ").append(m.name).append(": generation ").append(m.generation())
                            .append(", assignment ").append(sorted(m.assignment()))
                            .append(", assignments by generation ").append(m.assignedIn())
                            .append(", ").append(m.got().size()).append(" records");
                }
                try {
                    sb.append("\n  group: ").append(describe(admin, group));
                } catch (Exception e) {
                    sb.append("\n  describeConsumerGroups failed: ").append(e);
                }
                throw new ClientCheck.Mismatch(sb.toString());
            }
            Thread.sleep(50);
        }
    }

    static List<Integer> sorted(Collection<TopicPartition> tps) {
        return tps.stream().map(TopicPartition::partition).sorted().toList();
    }

    /** All members in one generation, with disjoint assignments covering every partition. */
    static boolean settled(List<Member> members) {
        int gen = members.get(0).generation();
        Set<TopicPartition> all = new HashSet<>();
        int n = 0;
        for (Member m : members) {
            if (m.generation() != gen || gen < 0) {
                return false;
            }
            all.addAll(m.assignment());
            n += m.assignment().size();
        }
        return n == PARTITIONS && all.size() == PARTITIONS;
    }

    static ConsumerGroupDescription describe(Admin admin, String group) throws Exception {
        return admin.describeConsumerGroups(List.of(group)).all().get(20, TimeUnit.SECONDS).get(group);
    }

    static Map<String, MemberDescription> byInstanceOrId(ConsumerGroupDescription d) {
        Map<String, MemberDescription> out = new TreeMap<>();
        for (MemberDescription m : d.members()) {
            out.put(m.groupInstanceId().orElse(m.consumerId()), m);
        }
        return out;
    }

    static String sharedGroup(Admin admin, String bootstrap, String topic, Map<At, Integer> sent) throws Exception {
        String group = topic + "-shared";
        AtomicBoolean open = new AtomicBoolean();
        List<Member> members = new ArrayList<>();
        for (int i = 0; i < MEMBERS; i++) {
            String name = group + "-" + i;
            members.add(new Member(i, name, consumerProps(bootstrap, group, name), topic, open::get));
        }
        try {
            // one at a time: each join is a rebalance (eager range: everyone revokes, rejoins, is
            // assigned again); after each, wait for every member so far to share all partitions
            for (int i = 0; i < MEMBERS; i++) {
                List<Member> started = members.subList(0, i + 1);
                members.get(i).start();
                await(started.size() + " member(s) in one generation sharing all " + PARTITIONS + " partitions",
                        () -> settled(started), members, admin, group);
            }
            open.set(true);
            await(RECORDS + " records consumed", () -> members.stream().mapToInt(m -> m.got().size()).sum() >= RECORDS,
                    members, admin, group);
            Thread.sleep(500); // anything beyond RECORDS (a redelivery) would show up here

            // the group as the coordinator describes it, while every member is still in it
            ConsumerGroupDescription d = describe(admin, group);
            check(d.groupState() == GroupState.STABLE, "describeConsumerGroups " + group + " while consuming: state "
                    + d.groupState() + ", expected STABLE: " + d);
            check("range".equals(d.partitionAssignor()), "describeConsumerGroups: assignor " + d.partitionAssignor()
                    + ", expected range (the first of the Java client's default strategies)");
            check(!d.isSimpleConsumerGroup(), "describeConsumerGroups: isSimpleConsumerGroup for a subscribed group");
            check(d.members().size() == MEMBERS, "describeConsumerGroups: " + d.members().size() + " members, expected "
                    + MEMBERS + ": " + d);
            Map<String, MemberDescription> described = new HashMap<>();
            for (MemberDescription md : d.members()) {
                described.put(md.consumerId(), md);
            }
            for (Member m : members) {
                MemberDescription md = described.get(m.memberId());
                check(md != null, "describeConsumerGroups: no member " + m.memberId() + " (" + m.name + "): " + d);
                check(md.clientId().equals(m.name), "describeConsumerGroups: member " + m.memberId() + " client id "
                        + md.clientId() + ", expected " + m.name);
                check(md.groupInstanceId().isEmpty(), "describeConsumerGroups: dynamic member " + m.name
                        + " has group instance id " + md.groupInstanceId());
                check(md.assignment().topicPartitions().equals(m.assignment()), "describeConsumerGroups: member "
                        + m.name + " assigned " + sorted(md.assignment().topicPartitions()) + ", the consumer has "
                        + sorted(m.assignment()));
            }
        } finally {
            for (Member m : members) {
                m.stop.set(true);
            }
        }
        for (Member m : members) {
            m.stopAndJoin();
        }

        // ownership: per generation at most one owner per partition; the final one covers all
        Map<Integer, Map<TopicPartition, Integer>> owners = new TreeMap<>();
        for (Member m : members) {
            for (Map.Entry<Integer, Set<TopicPartition>> e : m.assignedIn().entrySet()) {
                for (TopicPartition tp : e.getValue()) {
                    check(tp.topic().equals(topic), m.name + " assigned " + tp + " of another topic");
                    Integer prev = owners.computeIfAbsent(e.getKey(), g -> new HashMap<>()).put(tp, m.index);
                    check(prev == null, "generation " + e.getKey() + ": " + tp + " assigned to both " + group + "-"
                            + prev + " and " + m.name);
                }
            }
        }
        int last = ((TreeMap<Integer, Map<TopicPartition, Integer>>) owners).lastKey();
        Map<TopicPartition, Integer> finalOwners = owners.get(last);
        check(finalOwners.size() == PARTITIONS, "generation " + last + " assigned only " + finalOwners);
        check(new HashSet<>(finalOwners.values()).size() == MEMBERS,
                "generation " + last + " left a member without partitions: " + finalOwners);

        // every record exactly once, in order per partition, by its partition's owner
        Map<At, Got> seen = new HashMap<>();
        int[] perMember = new int[MEMBERS];
        List<Got> all = new ArrayList<>();
        members.forEach(m -> all.addAll(m.got()));
        for (Got g : all) {
            String where = "record " + topic + "-" + g.partition() + "@" + g.offset() + " (member " + g.member()
                    + ", generation " + g.generation() + ")";
            Got prev = seen.put(new At(g.partition(), g.offset()), g);
            check(prev == null, where + ": consumed twice, also by member " + (prev == null ? "" : prev.member())
                    + " in generation " + (prev == null ? "" : prev.generation()));
            Integer i = sent.get(new At(g.partition(), g.offset()));
            check(i != null, where + ": not acknowledged by the producer");
            check(key(i).equals(g.key()) && value(i).equals(g.value()),
                    where + ": " + g.key() + "=" + g.value() + ", produced " + key(i) + "=" + value(i));
            Integer owner = owners.getOrDefault(g.generation(), Map.of())
                    .get(new TopicPartition(topic, g.partition()));
            check(owner != null && owner == g.member(), where + ": partition owned by " + owner + " in that generation");
            perMember[g.member()]++;
        }
        for (Member m : members) {
            Map<Integer, Long> lastOffset = new HashMap<>();
            for (Got g : m.got()) {
                Long prev = lastOffset.put(g.partition(), g.offset());
                check(prev == null || g.offset() > prev, "record " + topic + "-" + g.partition() + "@" + g.offset()
                        + " returned to " + m.name + " after offset " + prev);
            }
        }
        check(seen.size() == RECORDS, "consumed " + seen.size() + " distinct records, produced " + RECORDS);
        for (int i = 0; i < MEMBERS; i++) {
            check(perMember[i] > 0, "member " + i + " consumed nothing (per member: " + java.util.Arrays.toString(perMember) + ")");
        }

        // committed offsets: each partition's end offset, RECORDS in total
        Map<Integer, Long> ends = new TreeMap<>();
        for (At a : sent.keySet()) {
            ends.merge(a.partition(), a.offset() + 1, Math::max);
        }
        Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(20, TimeUnit.SECONDS);
        long sum = 0;
        for (int p = 0; p < PARTITIONS; p++) {
            OffsetAndMetadata om = committed.get(new TopicPartition(topic, p));
            check(om != null, "listConsumerGroupOffsets " + group + ": nothing committed for partition " + p + ": "
                    + committed);
            check(om.offset() == ends.get(p), "listConsumerGroupOffsets " + group + ": partition " + p + " at "
                    + om.offset() + ", end offset " + ends.get(p));
            sum += om.offset();
        }
        check(committed.size() == PARTITIONS, "listConsumerGroupOffsets " + group + ": " + committed);
        check(sum == RECORDS, "committed offsets sum to " + sum + ", expected " + RECORDS);

        // after every member left
        ConsumerGroupDescription d = describe(admin, group);
        check(d.groupState() == GroupState.EMPTY, "describeConsumerGroups " + group + " after close: state "
                + d.groupState() + ", expected EMPTY: " + d);
        check(d.members().isEmpty(), "describeConsumerGroups " + group + " after close: members " + d.members());
        Collection<GroupListing> listed = admin.listGroups().all().get(20, TimeUnit.SECONDS);
        Optional<GroupListing> gl = listed.stream().filter(l -> l.groupId().equals(group)).findFirst();
        check(gl.isPresent(), "listGroups " + listed + " lacks " + group);
        check(gl.get().groupState().map(s -> s == GroupState.EMPTY).orElse(true),
                "listGroups: " + group + " in state " + gl.get().groupState() + ", expected EMPTY");
        check("consumer".equals(gl.get().protocol()), "listGroups: " + group + " protocol type " + gl.get().protocol());

        admin.deleteConsumerGroups(List.of(group)).all().get(20, TimeUnit.SECONDS);
        listed = admin.listGroups().all().get(20, TimeUnit.SECONDS);
        check(listed.stream().noneMatch(l -> l.groupId().equals(group)), "listGroups after deleteConsumerGroups: "
                + listed);
        committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(20, TimeUnit.SECONDS);
        check(committed.isEmpty(), "listConsumerGroupOffsets after deleteConsumerGroups " + group + ": " + committed);
        return group + " (" + java.util.Arrays.toString(perMember) + " records per member)";
    }

    static String staticGroup(Admin admin, String bootstrap, String topic) throws Exception {
        String group = topic + "-static";
        List<Member> members = new ArrayList<>();
        Member s1 = staticMember(0, "static-1", bootstrap, group, topic);
        Member s2 = staticMember(1, "static-2", bootstrap, group, topic);
        members.add(s1);
        members.add(s2);
        try {
            s1.start();
            s2.start();
            await("static-1 and static-2 in one generation sharing all " + PARTITIONS + " partitions",
                    () -> settled(List.of(s1, s2)), members, admin, group);
            Set<TopicPartition> a1 = s1.assignment();
            Set<TopicPartition> a2 = s2.assignment();
            String oldId = s1.memberId();
            check(!a1.isEmpty() && !a2.isEmpty(), "static assignments " + sorted(a1) + " / " + sorted(a2));
            ConsumerGroupDescription d = describe(admin, group);
            Map<String, MemberDescription> ms = byInstanceOrId(d);
            check(d.groupState() == GroupState.STABLE && d.members().size() == 2
                    && ms.keySet().equals(Set.of("static-1", "static-2")),
                    "describeConsumerGroups " + group + ": " + d);
            check(ms.get("static-1").consumerId().equals(oldId), "describe: static-1 member id "
                    + ms.get("static-1").consumerId() + ", the consumer has " + oldId);

            // close static-1: a static Java member does not send LeaveGroup, so it stays in the group
            s1.stopAndJoin();
            d = describe(admin, group);
            ms = byInstanceOrId(d);
            check(d.members().size() == 2 && ms.keySet().equals(Set.of("static-1", "static-2")),
                    "describeConsumerGroups after static-1 closed"
                    + " (no LeaveGroup): members " + ms.keySet() + ", expected static-1 still there: " + d);
            check(ms.get("static-1").consumerId().equals(oldId), "after close: static-1 member id "
                    + ms.get("static-1").consumerId() + ", was " + oldId);

            // a new consumer with the same group.instance.id takes static-1's place
            Member again = staticMember(0, "static-1", bootstrap, group, topic);
            members.set(0, again);
            again.start();
            await("the new static-1 to get an assignment", () -> again.assignments() > 0 && settled(List.of(again, s2)),
                    members, admin, group);
            check(!again.memberId().equals(oldId), "the rejoined static-1 kept member id " + oldId);
            check(again.assignment().equals(a1), "rejoined static-1 got partitions " + sorted(again.assignment())
                    + ", it had " + sorted(a1));
            check(s2.assignment().equals(a2), "static-2 has partitions " + sorted(s2.assignment())
                    + " after static-1 rejoined, it had " + sorted(a2));
            d = describe(admin, group);
            ms = byInstanceOrId(d);
            check(d.members().size() == 2 && ms.keySet().equals(Set.of("static-1", "static-2")),
                    "describe after rejoin: expected static-1 (replaced) and static-2 only: " + d);
            check(ms.get("static-1").consumerId().equals(again.memberId()), "describe after rejoin: static-1 is "
                    + ms.get("static-1").consumerId() + ", the consumer has " + again.memberId());
            check(ms.get("static-1").assignment().topicPartitions().equals(a1), "describe after rejoin: static-1 "
                    + "assigned " + sorted(ms.get("static-1").assignment().topicPartitions()));
        } finally {
            for (Member m : members) {
                m.stop.set(true);
            }
        }
        for (Member m : members) {
            m.stopAndJoin();
        }
        // both static members closed without leaving: the group is not empty, so it cannot be deleted
        try {
            admin.deleteConsumerGroups(List.of(group)).all().get(20, TimeUnit.SECONDS);
            throw new ClientCheck.Mismatch("deleteConsumerGroups " + group + " with static members in it succeeded");
        } catch (ExecutionException e) {
            check(e.getCause() instanceof GroupNotEmptyException,
                    "deleteConsumerGroups " + group + ": expected GroupNotEmptyException, got " + e.getCause());
        }
        return group + " (" + sorted(s1.assignment()) + " / " + sorted(s2.assignment()) + ")";
    }

    static Member staticMember(int index, String instance, String bootstrap, String group, String topic) {
        Properties p = consumerProps(bootstrap, group, group + "-" + instance);
        p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
        return new Member(index, instance, p, topic, () -> true);
    }
}
