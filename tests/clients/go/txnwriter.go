package main

// clientcheck txn-writer BOOTSTRAP TOPIC WRITER SEED (BOOTSTRAP: host:port[,host:port…]): one transactional producer
// (franz-go, transaction version 2 when the broker finalizes it: an epoch bump per
// transaction, so no request of an earlier transaction can end a later one) running
// transactions of txnWriterRecords records over partitions 0 and 1 of TOPIC until its stdin
// closes. Before each transaction it reads what is new in both partitions with its own
// read_committed consumer. One JSON line per transaction on stdout:
// {"n": N, "values": [...], "reads": [[partition, offset, value], ...], "outcome": "committed" |
// "aborted" | "unknown"} — committed and aborted only when the broker acknowledged the end,
// unknown for a commit whose end was not acknowledged; a transaction never asked to commit is
// aborted whatever happened. Errors go to stderr; exit 0 once stdin closed.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const txnWriterRecords = 6

type txnLine struct {
	N       int      `json:"n"`
	Values  []string `json:"values"`
	Reads   [][3]any `json:"reads"`
	Outcome string   `json:"outcome"`
}

func txnWriter(args []string) {
	if len(args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: clientcheck txn-writer BOOTSTRAP TOPIC WRITER SEED")
		os.Exit(2)
	}
	bootstrap, topic := strings.Split(args[0], ","), args[1]
	wid, err1 := strconv.Atoi(args[2])
	seed, err2 := strconv.ParseInt(args[3], 10, 64)
	if err1 != nil || err2 != nil {
		fmt.Fprintf(os.Stderr, "WRITER and SEED must be integers: %q %q\n", args[2], args[3])
		os.Exit(2)
	}
	rng := rand.New(rand.NewSource(seed*31 + int64(wid)))
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	out := bufio.NewWriter(os.Stdout)
	emit := func(l txnLine) {
		b, _ := json.Marshal(l)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	reader, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {
			0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "reader: %v\n", err)
		os.Exit(2)
	}
	defer reader.Close()
	newProducer := func() *kgo.Client {
		for ctx.Err() == nil {
			cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...),
				kgo.TransactionalID(fmt.Sprintf("jepsen-txn-%d", wid)),
				kgo.TransactionTimeout(20*time.Second),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.RecordDeliveryTimeout(15*time.Second),
				kgo.RequestTimeoutOverhead(5*time.Second))
			if err == nil {
				return cl
			}
			fmt.Fprintf(os.Stderr, "writer %d: client: %v\n", wid, err)
			time.Sleep(500 * time.Millisecond)
		}
		return nil
	}
	cl := newProducer()
	for n := 1; cl != nil && ctx.Err() == nil; n++ {
		line := txnLine{N: n, Reads: [][3]any{}}
		pctx, pcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		reader.PollRecords(pctx, 1000).EachRecord(func(r *kgo.Record) {
			line.Reads = append(line.Reads, [3]any{r.Partition, r.Offset, string(r.Value)})
		})
		pcancel()
		commit := rng.Float64() < 0.75
		var records []*kgo.Record
		for k := 0; k < txnWriterRecords; k++ {
			v := fmt.Sprintf("w%d-t%05d-%d", wid, n, k)
			line.Values = append(line.Values, v)
			records = append(records, &kgo.Record{Topic: topic, Partition: int32(k % 2), Value: []byte(v)})
		}
		// Bounded so that a stalled end does not outlive the test; the context of the whole run
		// is not used: the writer finishes the transaction under way when told to stop.
		tctx, tcancel := context.WithTimeout(context.Background(), 40*time.Second)
		err := cl.BeginTransaction()
		stalled := false
		if err == nil {
			stalled, err = produceBounded(tctx, cl, records)
		}
		try := kgo.TransactionEndTry(commit && err == nil)
		var endErr error
		if stalled {
			// The client still holds records it cannot tell the fate of and may never give
			// them up (franz-go waits for an idempotent batch's outcome, twmb/franz-go#930;
			// seen with no connection left open, after the coordinator aborted the
			// transaction on its timeout). The transaction is abandoned, never asked to
			// commit: the coordinator's timeout, or the next instance's InitProducerId,
			// aborts it.
			fmt.Fprintf(os.Stderr, "writer %d txn %d: produce: %v; abandoning the client\n", wid, n, err)
			endErr = err
		} else {
			if err != nil {
				fmt.Fprintf(os.Stderr, "writer %d txn %d: produce: %v\n", wid, n, err)
				_ = cl.AbortBufferedRecords(tctx)
			}
			endErr = cl.EndTransaction(tctx, try)
			if endErr != nil {
				fmt.Fprintf(os.Stderr, "writer %d txn %d: end (commit %v): %v\n", wid, n, bool(try), endErr)
			}
		}
		tcancel()
		switch {
		case !bool(try):
			// Never asked to commit (aborted, or its produce failed and it was aborted).
			line.Outcome = "aborted"
		case endErr == nil:
			line.Outcome = "committed"
		default:
			line.Outcome = "unknown"
		}
		emit(line)
		if endErr != nil {
			closeBounded(cl)
			cl = newProducer()
		}
	}
	if cl != nil {
		closeBounded(cl)
	}
}

// produceBounded is ProduceSync that returns when ctx ends even if the client keeps waiting
// for its records: whether it gave up waiting (the client is then left with records it may
// never release), and their first error.
func produceBounded(ctx context.Context, cl *kgo.Client, records []*kgo.Record) (bool, error) {
	done := make(chan error, 1)
	go func() { done <- cl.ProduceSync(ctx, records...).FirstErr() }()
	select {
	case err := <-done:
		return false, err
	case <-ctx.Done():
		// a moment for the client to fail them itself, as it should on ctx's end
		select {
		case err := <-done:
			return false, err
		case <-time.After(5 * time.Second):
			return true, fmt.Errorf("records not released 5 s after their context ended: %w", ctx.Err())
		}
	}
}

// closeBounded closes cl, waiting at most 10 s (a client holding records it cannot release).
func closeBounded(cl *kgo.Client) {
	done := make(chan struct{})
	go func() {
		cl.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fmt.Fprintln(os.Stderr, "client close still waiting after 10 s; left behind")
	}
}
