package mirror

import (
	"context"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupSwitchesMidStream: a consumer group reads part of a topic on
// the source, commits and leaves; the tailing mirror translates its
// offsets; the group resumes on the target while records keep arriving,
// and every record is read exactly once across both clusters.
func TestGroupSwitchesMidStream(t *testing.T) {
	for _, d := range directions {
		t.Run(d.name, func(t *testing.T) {
			src, tgt := d.from(t), d.to(t)
			const topic, group = "payments", "app"
			createTopic(t, src, topic, 3, nil)
			pc := produceClient(t, src)
			next := 0
			produceN := func(n int) {
				var recs []*kgo.Record
				for range n {
					recs = append(recs, testRecord(topic, int32(next%3), next))
					next++
				}
				produce(t, pc, recs...)
			}
			produceN(300)

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			mctx, stopMirror := context.WithCancel(ctx)
			stats := make(chan Stats, 1)
			var mirrorErr error
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, mirrorErr = Run(mctx, Config{
					From: src.addrs, To: tgt.addrs, Groups: regexp.MustCompile(group),
					Interval: 20 * time.Millisecond, MaxBatch: 25, Logger: quietLogger(),
					Progress: func(s Stats) {
						select {
						case stats <- s:
						case <-mctx.Done():
						}
					},
				})
			}()
			defer func() {
				stopMirror()
				wg.Wait()
				if mirrorErr != nil {
					t.Errorf("mirror: %v", mirrorErr)
				}
			}()

			seen := map[string]int{}
			consume := func(c cluster, want int) {
				t.Helper()
				cl := client(t, c, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
				got := 0
				for got < want {
					fs := cl.PollRecords(ctx, want-got)
					if err := ctx.Err(); err != nil {
						t.Fatalf("consuming on %s: %v after %d of %d records", c.name, err, got, want)
					}
					for _, fe := range fs.Errors() {
						t.Fatalf("consuming on %s: %v", c.name, fe.Err)
					}
					fs.EachRecord(func(r *kgo.Record) {
						seen[string(r.Value)+"|"+string(r.Key)]++
						got++
					})
					if err := cl.CommitRecords(ctx, fs.Records()...); err != nil {
						t.Fatalf("commit on %s: %v", c.name, err)
					}
				}
				cl.Close() // leaves the group
			}

			// Part of the stream on the source, while more is produced.
			consume(src, 170)
			produceN(200)

			// Wait for a translation, started after the group left, of
			// every partition it committed.
			committed, err := admin(t, src).FetchOffsets(ctx, group)
			if err != nil || committed.Error() != nil {
				t.Fatalf("source offsets: %v %v", err, committed.Error())
			}
			waitStats(t, ctx, stats, 2, func(s Stats) bool {
				g, ok := s.Groups[group]
				return ok && g.Skipped == "" && len(g.Offsets[topic]) == len(committed[topic])
			})
			produceN(150)
			waitStats(t, ctx, stats, 1, func(s Stats) bool { return s.Topics[topic].Lag == 0 })

			// The rest on the target.
			consume(tgt, next-170)
			if len(seen) != next {
				t.Fatalf("%d distinct records read, %d produced", len(seen), next)
			}
			for k, n := range seen {
				if n != 1 {
					t.Fatalf("record %s read %d times", k, n)
				}
			}
			// And the mirror leaves the group alone once it ran there.
			waitStats(t, ctx, stats, 2, func(s Stats) bool { return s.Groups[group].Skipped != "" })
		})
	}
}

// waitStats waits for a progress snapshot, at least after skip more
// snapshots, that satisfies ok.
func waitStats(t *testing.T, ctx context.Context, stats <-chan Stats, skip int, ok func(Stats) bool) {
	t.Helper()
	var last Stats
	for n := 0; ; n++ {
		select {
		case s := <-stats:
			if n >= skip && ok(s) {
				return
			}
			last = s
		case <-ctx.Done():
			t.Fatalf("waiting for mirror progress: %v; last progress: %+v", ctx.Err(), last)
		}
	}
}
