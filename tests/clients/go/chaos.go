package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// chaosProduce is `clientcheck chaos-produce BOOTSTRAP TOPIC NAME SECONDS`: an idempotent kgo
// producer (franz-go's default, acks=all) sending values NAME-SEQ to TOPIC, a trickle alternating
// with bursts, while brokers are killed under it; it prints "ACK partition offset value" for
// every record acknowledged, and stops after SECONDS or when its stdin closes, flushing first.
// Used by tests/clients/cluster/test_replication.py.
func chaosProduce(args []string) {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: clientcheck chaos-produce BOOTSTRAP TOPIC NAME SECONDS")
		os.Exit(2)
	}
	topic, name := args[1], args[2]
	seconds, err := strconv.Atoi(args[3])
	if err != nil {
		fmt.Fprintf(os.Stderr, "SECONDS must be a number, got %q\n", args[3])
		os.Exit(2)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(splitComma(args[0])...),
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordDeliveryTimeout(120*time.Second),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ERROR:", err)
		os.Exit(2)
	}
	var stop atomic.Bool
	go func() {
		r := bufio.NewReader(os.Stdin)
		for {
			if _, err := r.ReadByte(); err != nil {
				stop.Store(true)
				return
			}
		}
	}()
	var out sync.Mutex
	var acked atomic.Int64
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	seq := 0
	for time.Now().Before(deadline) && !stop.Load() {
		burst := (seq/300)%2 == 1
		n := 60
		if burst {
			n = 300
		}
		for i := 0; i < n; i, seq = i+1, seq+1 {
			value := fmt.Sprintf("%s-%d", name, seq)
			cl.Produce(context.Background(), &kgo.Record{Value: []byte(value)}, func(r *kgo.Record, err error) {
				if err != nil {
					return
				}
				out.Lock()
				fmt.Printf("ACK %d %d %s\n", r.Partition, r.Offset, value)
				out.Unlock()
				acked.Add(1)
			})
			if !burst {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if burst {
			time.Sleep(300 * time.Millisecond)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = cl.Flush(ctx)
	cl.Close()
	out.Lock()
	os.Stdout.Sync()
	out.Unlock()
	fmt.Fprintf(os.Stderr, "sent %d, acknowledged %d, flush: %v\n", seq, acked.Load(), err)
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}
