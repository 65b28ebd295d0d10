package main

// clientcheck secure BOOTSTRAP TOPIC CAFILE MECHANISM USER PASSWORD: franz-go over TLS with
// SASL/SCRAM (MECHANISM SCRAM-SHA-256 or SCRAM-SHA-512), or over mutual TLS (MECHANISM MTLS:
// USER is the client certificate's PEM file, PASSWORD its key's): produces 100 records to
// partition 0, reads them back with a group-less consumer and compares them. Exit 3 when the
// broker refused the login or the certificate, 1 on a mismatch, 2 on another error.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func secure(args []string) {
	if len(args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: clientcheck secure BOOTSTRAP TOPIC CAFILE MECHANISM USER PASSWORD")
		os.Exit(2)
	}
	bootstrap, topic, caFile, mechanism, user, password := args[0], args[1], args[2], args[3], args[4], args[5]
	pem, err := os.ReadFile(caFile)
	if err != nil {
		fail(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		fail(errors.New("no CA certificate in " + caFile))
	}
	tlsConfig := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.RequestRetries(2)}
	auth := scram.Auth{User: user, Pass: password}
	switch mechanism {
	case "MTLS":
		cert, err := tls.LoadX509KeyPair(user, password)
		if err != nil {
			fail(err)
		}
		tlsConfig.Certificates = []tls.Certificate{cert}
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(auth.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(auth.AsSha512Mechanism()))
	default:
		fail(errors.New("mechanism " + mechanism))
	}
	opts = append(opts, kgo.DialTLSConfig(tlsConfig))
	producer, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		fail(err)
	}
	defer producer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A connection is made (TLS, then SASL) before anything is sent: a refused login ends here.
	pingCtx, pingCancel := context.WithTimeout(ctx, 15*time.Second)
	defer pingCancel()
	if err := producer.Ping(pingCtx); err != nil {
		if refused(err) {
			fmt.Println("REFUSED:", err)
			os.Exit(3)
		}
		fail(err)
	}
	const n = 100
	for i := 0; i < n; i++ {
		r := &kgo.Record{Value: []byte(fmt.Sprintf("secure-%d", i)), Partition: 0}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			if refused(err) {
				fmt.Println("REFUSED:", err)
				os.Exit(3)
			}
			fail(err)
		}
	}
	consumer, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		fail(err)
	}
	defer consumer.Close()
	got := 0
	for got < n {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			fail(fmt.Errorf("read %d of %d records: %w", got, n, err))
		}
		fetches.EachError(func(t string, p int32, err error) { fail(err) })
		fetches.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("secure-%d", got); string(r.Value) != want {
				panic(mismatch{fmt.Sprintf("offset %d: %q, want %q", r.Offset, r.Value, want)})
			}
			got++
		})
	}
	fmt.Printf("OK: %d records over TLS with %s as %s\n", n, mechanism, user)
}

// refused: the broker turned the login down (SASL) or the certificate (a TLS alert it sent).
func refused(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed) || strings.Contains(err.Error(), "remote error: tls:")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ERROR:", err)
	os.Exit(2)
}
