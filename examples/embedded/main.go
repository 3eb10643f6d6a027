// Command embedded runs a Sluice broker inside a Go program, writes
// records to it with the producer library (no network in between), and
// reads them back over the Kafka protocol with franz-go, as any Kafka
// client would.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/producer"
)

func main() {
	dir, err := os.MkdirTemp("", "sluice-embedded-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := run(context.Background(), os.Stdout, dir); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, w io.Writer, dir string) error {
	b, err := broker.New(broker.DataDir(dir), broker.ListenAddr("127.0.0.1:0"))
	if err != nil {
		return err
	}
	if err := b.Start(); err != nil {
		b.Close()
		return err
	}
	defer b.Close()
	if err := b.CreateTopic(ctx, "events", 1, nil); err != nil {
		return err
	}

	// Append in-process: acks -1 returns once the records are fsynced.
	p, err := producer.NewRecordProducer(producer.WithSink(producer.NewInProcessSink(b, "events", 0, -1)))
	if err != nil {
		return err
	}
	for _, v := range []string{"created", "paid", "shipped"} {
		off, err := p.Produce(ctx, producer.Record{Key: []byte("order-1"), Value: []byte(v)})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "produced %s at offset %d\n", v, off)
	}
	if err := p.Close(ctx); err != nil {
		return err
	}

	// Read back over the network, at the broker's address.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for seen := 0; seen < 3; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		fs.EachRecord(func(r *kgo.Record) {
			fmt.Fprintf(w, "consumed %s=%s at offset %d\n", r.Key, r.Value, r.Offset)
			seen++
		})
	}
	return nil
}
