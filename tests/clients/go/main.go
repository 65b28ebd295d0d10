// Command clientcheck checks franz-go (kgo + kadm) against a ringlog node: kadm creates and
// describes a topic, an idempotent kgo producer (the franz-go default) writes records with every
// codec (none, gzip, snappy, lz4, zstd) - keyed and unkeyed, null values, headers (null header
// values, repeated keys) and explicit timestamps - and a group-less kgo consumer
// (kgo.ConsumePartitions from the start) reads everything back and compares every field.
//
// Usage: clientcheck BOOTSTRAP [TOPIC]. Exit 0 when everything matched, 1 on a mismatch, 2 on
// an error. clientcheck groups BOOTSTRAP [TOPIC] runs the consumer-group check of groups.go
// instead; clientcheck chaos-produce ... the fault tests' producer of chaos.go; clientcheck
// secure ... TLS and SASL/SCRAM (security.go); clientcheck txn BOOTSTRAP the transactions check
// of txn.go (GroupTransactSession).
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	partitions = 4
	perCodec   = 250
	baseTS     = int64(1_700_000_000_000)
)

type codec struct {
	name string
	c    kgo.CompressionCodec
}

var codecs = []codec{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

type at struct {
	partition int32
	offset    int64
}

type sent struct {
	key, value []byte
	headers    []kgo.RecordHeader
	ts         int64
	codec      string
	seq        int
}

type mismatch struct{ msg string }

func (m mismatch) Error() string { return m.msg }

func check(ok bool, format string, args ...any) {
	if !ok {
		panic(mismatch{fmt.Sprintf(format, args...)})
	}
}

func must(err error, what string) {
	if err != nil {
		panic(fmt.Errorf("%s: %w", what, err))
	}
}

func show(b []byte) string {
	if b == nil {
		return "null"
	}
	return strconv.Quote(string(b))
}

func showHeaders(hs []kgo.RecordHeader) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.Key + "=" + show(h.Value)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "chaos-produce" {
		chaosProduce(args[1:])
		return
	}
	if len(args) > 0 && args[0] == "secure" {
		secure(args[1:])
		return
	}
	if len(args) > 0 && args[0] == "txn-writer" {
		txnWriter(args[1:])
		return
	}
	if len(args) > 0 && args[0] == "txn" {
		txnCheck(args[1:])
		return
	}
	groupMode := len(args) > 0 && (args[0] == "groups" || args[0] == "groups848")
	if groupMode {
		nextGen = args[0] == "groups848"
		args = args[1:]
	}
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: clientcheck [groups|groups848] BOOTSTRAP [TOPIC]")
		os.Exit(2)
	}
	bootstrap := args[0]
	topic := "franz-codecs"
	if groupMode {
		topic = "franz-groups"
	}
	if len(args) > 1 {
		topic = args[1]
	}
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			if m, ok := r.(mismatch); ok {
				fmt.Fprintln(os.Stderr, "MISMATCH:", m.msg)
				os.Exit(1)
			}
			fmt.Fprintln(os.Stderr, "ERROR:", r)
			os.Stderr.Write(debug.Stack())
			os.Exit(2)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if groupMode {
		what := groups(ctx, bootstrap, topic)
		fmt.Printf("OK: %d records consumed exactly once by %d group members of %s over %d partitions, committed offsets sum to %d; %d ms\n",
			groupRecords, groupMembers, what, groupPartitions, groupRecords, time.Since(start).Milliseconds())
		return
	}

	admin(ctx, bootstrap, topic)
	all := map[at]sent{}
	for i := range codecs {
		produce(ctx, bootstrap, topic, i, all)
	}
	n := consume(ctx, bootstrap, topic, all)
	fmt.Printf("OK: %d records in %d codecs over %d partitions verified in %d ms\n",
		n, len(codecs), partitions, time.Since(start).Milliseconds())
}

func admin(ctx context.Context, bootstrap, topic string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	must(err, "admin client")
	defer cl.Close()
	adm := kadm.NewClient(cl)

	resp, err := adm.CreateTopics(ctx, partitions, 1, nil, topic)
	must(err, "CreateTopics")
	r, err := resp.On(topic, nil)
	must(err, "CreateTopics response")
	check(r.Err == nil, "CreateTopics %s: %v (%s)", topic, r.Err, r.ErrMessage)
	check(r.NumPartitions == partitions, "CreateTopics %s: %d partitions", topic, r.NumPartitions)

	resp, err = adm.CreateTopics(ctx, partitions, 1, nil, topic)
	must(err, "second CreateTopics")
	r, err = resp.On(topic, nil)
	must(err, "second CreateTopics response")
	check(errors.Is(r.Err, kerr.TopicAlreadyExists), "second CreateTopics %s: %v, expected TOPIC_ALREADY_EXISTS", topic, r.Err)

	brokers, err := adm.ListBrokers(ctx)
	must(err, "ListBrokers")
	ids := brokers.NodeIDs()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	check(len(ids) == 2 && ids[0] == 0 && ids[1] == 1, "ListBrokers ids %v, expected [0 1]", ids)

	tds, err := adm.ListTopics(ctx, topic)
	must(err, "ListTopics")
	td, ok := tds[topic]
	check(ok && td.Err == nil, "ListTopics %s: %v %v", topic, ok, td.Err)
	check(len(td.Partitions) == partitions, "ListTopics %s: %d partitions", topic, len(td.Partitions))
	for p, pd := range td.Partitions {
		check(pd.Err == nil && (pd.Leader == 0 || pd.Leader == 1), "partition %d: leader %d err %v", p, pd.Leader, pd.Err)
	}
}

func record(ci, i int) sent {
	name := codecs[ci].name
	s := sent{codec: name, seq: i, ts: baseTS + 1000*int64(i) + int64(ci)}
	if i%3 != 0 {
		s.key = []byte(fmt.Sprintf("key-%d", i%17))
	}
	if i%50 != 49 {
		s.value = []byte(strings.Repeat(fmt.Sprintf("%s-value-%d-", name, i), 1+i%7))
	}
	s.headers = []kgo.RecordHeader{{Key: "h", Value: []byte(strconv.Itoa(i))}, {Key: "codec", Value: []byte(name)}}
	if i%10 == 0 {
		s.headers = append(s.headers, kgo.RecordHeader{Key: "nullvalue", Value: nil})
	}
	if i%25 == 0 {
		s.headers = append(s.headers, kgo.RecordHeader{Key: "h", Value: []byte("repeated")})
	}
	return s
}

func produce(ctx context.Context, bootstrap, topic string, ci int, out map[at]sent) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(codecs[ci].c),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RequiredAcks(kgo.AllISRAcks()), // with idempotence: the franz-go default
		// No kgo.RecordDeliveryTimeout: franz-go measures it from each record's Timestamp, and
		// these carry explicit timestamps from 2023. The context below bounds the wait instead.
	)
	must(err, "producer client")
	defer cl.Close()

	recs := make([]*kgo.Record, perCodec)
	want := make(map[*kgo.Record]sent, perCodec)
	for i := range recs {
		s := record(ci, i)
		recs[i] = &kgo.Record{Key: s.key, Value: s.value, Headers: s.headers, Timestamp: time.UnixMilli(s.ts)}
		want[recs[i]] = s
	}
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	results := cl.ProduceSync(pctx, recs...)
	check(len(results) == perCodec, "%d produce results", len(results))
	// results come in completion order, not in the order of recs
	for _, res := range results {
		r := res.Record
		s, ok := want[r]
		check(ok, "%s: a produce result for a record never sent", codecs[ci].name)
		delete(want, r)
		where := fmt.Sprintf("%s record %d", codecs[ci].name, s.seq)
		must(res.Err, where)
		check(r.Timestamp.UnixMilli() == s.ts, "%s: timestamp %d != %d", where, r.Timestamp.UnixMilli(), s.ts)
		check(r.Topic == topic, "%s: topic %q", where, r.Topic)
		check(r.Partition >= 0 && r.Partition < partitions, "%s: partition %d", where, r.Partition)
		check(r.Offset >= 0, "%s: offset %d", where, r.Offset)
		check(r.ProducerID >= 0, "%s: producer id %d (idempotence off?)", where, r.ProducerID)
		k := at{r.Partition, r.Offset}
		prev, dup := out[k]
		check(!dup, "%s: offset %d/%d handed out twice (also %s %d)", where, r.Partition, r.Offset, prev.codec, prev.seq)
		out[k] = s
	}
	check(len(want) == 0, "%s: %d records without a produce result", codecs[ci].name, len(want))
}

func consume(ctx context.Context, bootstrap, topic string, all map[at]sent) int {
	perPartition := map[int32]int64{}
	for k := range all {
		perPartition[k.partition]++
	}
	total := len(all)
	check(total == perCodec*len(codecs), "acked %d records", total)

	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	must(err, "consumer client")
	defer cl.Close()

	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	must(err, "ListStartOffsets")
	ends, err := adm.ListEndOffsets(ctx, topic)
	must(err, "ListEndOffsets")
	for p := int32(0); p < partitions; p++ {
		s, ok := starts.Lookup(topic, p)
		check(ok && s.Err == nil && s.Offset == 0, "start offset %d: %+v", p, s)
		e, ok := ends.Lookup(topic, p)
		check(ok && e.Err == nil && e.Offset == perPartition[p], "end offset %d: %+v, acked %d", p, e, perPartition[p])
	}

	var got []*kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < total && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				panic(fmt.Errorf("fetch %s/%d: %w", t, p, err))
			}
		})
		got = append(got, fs.Records()...)
	}
	check(len(got) == total, "consumed %d of %d records within 30 s", len(got), total)
	pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	extra := cl.PollFetches(pctx).Records()
	pcancel()
	check(len(extra) == 0, "%d records beyond the acknowledged ones", len(extra))

	next := map[int32]int64{}
	lastSeq := map[string]int{}
	keyParts := map[string]map[int32]bool{}
	for _, r := range got {
		where := fmt.Sprintf("record %s-%d@%d", r.Topic, r.Partition, r.Offset)
		check(r.Topic == topic, "%s: topic", where)
		check(r.Offset == next[r.Partition], "%s: expected offset %d next in this partition", where, next[r.Partition])
		next[r.Partition]++
		s, ok := all[at{r.Partition, r.Offset}]
		check(ok, "%s: not acknowledged by the producer", where)
		check(bytes.Equal(r.Key, s.key) && (r.Key == nil) == (s.key == nil), "%s: key %s != %s", where, show(r.Key), show(s.key))
		check(bytes.Equal(r.Value, s.value) && (r.Value == nil) == (s.value == nil), "%s: value %s != %s", where, show(r.Value), show(s.value))
		check(r.Timestamp.UnixMilli() == s.ts, "%s: timestamp %d != %d", where, r.Timestamp.UnixMilli(), s.ts)
		check(r.Attrs.TimestampType() == 0, "%s: timestamp type %d, expected CreateTime", where, r.Attrs.TimestampType())
		same := len(r.Headers) == len(s.headers)
		for i := 0; same && i < len(r.Headers); i++ {
			a, b := r.Headers[i], s.headers[i]
			same = a.Key == b.Key && bytes.Equal(a.Value, b.Value) && (a.Value == nil) == (b.Value == nil)
		}
		check(same, "%s: headers %s != %s", where, showHeaders(r.Headers), showHeaders(s.headers))
		check(r.ProducerID >= 0, "%s: producer id %d, expected an idempotent batch", where, r.ProducerID)
		sk := fmt.Sprintf("%d/%s", r.Partition, s.codec)
		if last, ok := lastSeq[sk]; ok {
			check(s.seq > last, "%s: %s record %d after %d", where, s.codec, s.seq, last)
		}
		lastSeq[sk] = s.seq
		if s.key != nil {
			if keyParts[string(s.key)] == nil {
				keyParts[string(s.key)] = map[int32]bool{}
			}
			keyParts[string(s.key)][r.Partition] = true
		}
	}
	for k, ps := range keyParts {
		check(len(ps) == 1, "key %q in %d partitions", k, len(ps))
	}
	check(len(next) == partitions, "records in %d partitions only", len(next))
	return len(got)
}
