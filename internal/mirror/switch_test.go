package mirror

import (
	"context"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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

// TestRerunLeavesRunGroupAlone checks that a new mirror run, which knows
// nothing of earlier runs, does not overwrite the offsets of a group that
// has run on the target and left it (consumers that switched over would
// otherwise read records again).
func TestRerunLeavesRunGroupAlone(t *testing.T) {
	for _, d := range directions {
		t.Run(d.name, func(t *testing.T) {
			src, tgt := d.from(t), d.to(t)
			const topic, group = "ledger", "app"
			createTopic(t, src, topic, 1, nil)
			pc := produceClient(t, src)
			for i := range 10 {
				produce(t, pc, testRecord(topic, 0, i))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// The group commits offset 4 on the source, by hand.
			if rs, err := admin(t, src).CommitOffsets(ctx, group, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 4, LeaderEpoch: -1}}}); err != nil || rs.Error() != nil {
				t.Fatalf("commit on the source: %v %v", err, rs.Error())
			}
			cfg := Config{From: src.addrs, To: tgt.addrs, Once: true}
			rep := runMirror(t, ctx, cfg)
			if got := rep.Groups[group].Offsets[topic][0]; got != 4 {
				t.Fatalf("first run wrote %s/0 at %d (skipped: %q), want 4", topic, got, rep.Groups[group].Skipped)
			}

			// The group runs on the target to the end, commits, leaves.
			cl := client(t, tgt, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
			for got := 0; got < 6; {
				fs := cl.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consuming on the target: %v after %d records", err, got)
				}
				for _, fe := range fs.Errors() {
					t.Fatalf("consuming on the target: %v", fe.Err)
				}
				got += fs.NumRecords()
				if err := cl.CommitRecords(ctx, fs.Records()...); err != nil {
					t.Fatalf("commit on the target: %v", err)
				}
			}
			cl.Close()

			rep = runMirror(t, ctx, cfg)
			if rep.Groups[group].Skipped == "" {
				t.Errorf("second run wrote group %s (%v); want it skipped", group, rep.Groups[group].Offsets)
			}
			offs, err := admin(t, tgt).FetchOffsets(ctx, group)
			if err != nil || offs.Error() != nil {
				t.Fatalf("target offsets: %v %v", err, offs.Error())
			}
			if o, _ := offs.Lookup(topic, 0); o.At != 10 {
				t.Fatalf("target offset of %s/0 = %d after the second run, want 10 (the group's own commit)", topic, o.At)
			}
		})
	}
}
