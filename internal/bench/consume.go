package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ConsumeConfig describes a consume run: read a topic from its start
// until Records records, or until every partition's end offset as it was
// when the run started.
type ConsumeConfig struct {
	Topic     string
	Records   int64 // stop after this many; 0 means at the end offsets
	BrokerPID int
	Interval  time.Duration
	Progress  io.Writer
}

// ConsumeClientOpts are the options a consume run's client needs on top
// of the connection options: the topic, read from the start.
func ConsumeClientOpts(topic string) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
}

// Consume reads with cl, which must have been built with
// ConsumeClientOpts (plus connection options), and returns the result.
func Consume(ctx context.Context, cl *kgo.Client, cfg ConsumeConfig) (Result, error) {
	if cfg.Topic == "" {
		return Result{}, errors.New("a topic is required")
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, cfg.Topic)
	if err != nil {
		return Result{}, err
	}
	if err := ends.Error(); errors.Is(err, kerr.UnknownTopicOrPartition) {
		return Result{}, fmt.Errorf("topic %q does not exist (bench produce -t %s fills it)", cfg.Topic, cfg.Topic)
	} else if err != nil {
		return Result{}, fmt.Errorf("topic %q: %w", cfg.Topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 && cfg.Records == 0 {
		return Result{}, fmt.Errorf("topic %q is empty", cfg.Topic)
	}
	before, err := readBroker(cfg.BrokerPID)
	if err != nil {
		return Result{}, err
	}
	var c counters
	start := time.Now()
	stopProgress := progress(cfg.Interval, cfg.Progress, start, &c)
	defer stopProgress()
	for {
		if cfg.Records > 0 && c.records.Load() >= cfg.Records {
			break
		}
		if cfg.Records == 0 && len(want) == 0 {
			break
		}
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			break
		}
		fs.EachError(func(_ string, _ int32, err error) { c.fail(err) })
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			var n, b int64
			for _, r := range p.Records {
				n++
				b += int64(len(r.Key) + len(r.Value))
			}
			c.records.Add(n)
			c.bytes.Add(b)
			if len(p.Records) > 0 {
				if end, ok := want[p.Partition]; ok && p.Records[len(p.Records)-1].Offset+1 >= end {
					delete(want, p.Partition)
				}
			}
		})
	}
	return finish(&c, start, cfg.BrokerPID, before), nil
}
