// Command quickstart writes a record to a running Sluice (or any Kafka)
// and reads it back with franz-go. The broker is SLUICE_BROKERS, else
// 127.0.0.1:9092.
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cmp.Or(os.Getenv("SLUICE_BROKERS"), "127.0.0.1:9092")),
		kgo.DefaultProduceTopic("quickstart"),
		kgo.AllowAutoTopicCreation(), // franz-go asks for it explicitly
		kgo.ConsumeTopics("quickstart"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		panic(err)
	}
	defer cl.Close()

	// acks=all and idempotence are franz-go's defaults: the reply comes
	// after Sluice has fsynced the record.
	r := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("hello")})
	if err := r.FirstErr(); err != nil {
		panic(err)
	}
	fmt.Println("written at offset", r[0].Record.Offset)

	// Poll until the record arrives: the first fetches may come before
	// the consumer has seen the topic the produce created.
	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			panic(err)
		}
		done := false
		fetches.EachRecord(func(rec *kgo.Record) {
			fmt.Printf("read %s=%s at offset %d\n", rec.Key, rec.Value, rec.Offset)
			done = true
		})
		if done {
			return
		}
	}
}
