package main

// clientcheck txn BOOTSTRAP: franz-go's GroupTransactSession (consume-transform-produce in
// transactions, offsets committed in them) copies txnRecords records from franz-txn-in to
// franz-txn-out, aborting every fourth transaction (the session rewinds to the committed
// offsets); a read_committed consumer then finds every input record in the output exactly once
// and nothing else. Exit 0 when it matched, 1 on a mismatch, 2 on an error.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const txnRecords = 2000

func txnCheck(args []string) {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: clientcheck txn BOOTSTRAP")
		os.Exit(2)
	}
	bootstrap := args[0]
	in, out := "franz-txn-in", "franz-txn-out"
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	fail := func(code int, format string, a ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", a...)
		os.Exit(code)
	}
	plain, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		fail(2, "client: %v", err)
	}
	defer plain.Close()
	adm := kadm.NewClient(plain)
	for _, t := range []string{in, out} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, t); err != nil {
			fail(2, "create %s: %v", t, err)
		}
	}
	want := map[string]bool{}
	var records []*kgo.Record
	for i := 0; i < txnRecords; i++ {
		v := fmt.Sprintf("r%05d", i)
		want["out-"+v] = true
		records = append(records, &kgo.Record{Topic: in, Value: []byte(v)})
	}
	if err := plain.ProduceSync(ctx, records...).FirstErr(); err != nil {
		fail(2, "produce input: %v", err)
	}

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(bootstrap),
		kgo.TransactionalID("franz-eos"),
		kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup("franz-eos-group"),
		kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(out),
	)
	if err != nil {
		fail(2, "session: %v", err)
	}
	defer sess.Close()
	copied, round := 0, 0
	for copied < txnRecords {
		if ctx.Err() != nil {
			fail(1, "MISMATCH: copied %d of %d before the deadline", copied, txnRecords)
		}
		fetches := sess.PollRecords(ctx, 300)
		if errs := fetches.Errors(); len(errs) > 0 {
			fail(2, "poll: %v", errs)
		}
		if fetches.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			fail(2, "begin: %v", err)
		}
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			sess.Produce(ctx, &kgo.Record{Value: append([]byte("out-"), r.Value...)}, nil)
		})
		round++
		abort := round%4 == 0
		committed, err := sess.End(ctx, kgo.TransactionEndTry(!abort))
		if err != nil {
			fail(2, "end: %v", err)
		}
		if committed {
			copied += n
		}
	}

	reader, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(out),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		fail(2, "reader: %v", err)
	}
	defer reader.Close()
	got := map[string]int{}
	idle := time.Now()
	for time.Since(idle) < 5*time.Second {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fetches := reader.PollFetches(pctx)
		pcancel()
		fetches.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)]++
			idle = time.Now()
		})
	}
	var bad []string
	for v, n := range got {
		if n != 1 || !want[v] {
			bad = append(bad, fmt.Sprintf("%s x%d", v, n))
		}
	}
	for v := range want {
		if got[v] == 0 {
			bad = append(bad, v+" missing")
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		fail(1, "MISMATCH: %d records wrong, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
	fmt.Printf("OK: %d records copied exactly once in %d transactions (every fourth aborted)\n", txnRecords, round)
}
