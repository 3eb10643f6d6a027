package mirror

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestOnceCopiesTopicsRecordsAndGroups mirrors two of three topics with
// --once and checks partitions, configs, every record and the translated
// group offsets on the target.
func TestOnceCopiesTopicsRecordsAndGroups(t *testing.T) {
	for _, d := range directions {
		t.Run(d.name, func(t *testing.T) {
			src, tgt := d.from(t), d.to(t)
			createTopic(t, src, "orders", 3, map[string]*string{"retention.ms": kadm.StringPtr("3600000"), "min.insync.replicas": kadm.StringPtr("1")})
			createTopic(t, src, "events", 2, nil)
			createTopic(t, src, "other", 1, nil)
			pc := produceClient(t, src)
			var recs []*kgo.Record
			for i := range 60 {
				recs = append(recs, testRecord("orders", int32(i%3), i), testRecord("events", int32(i%2), i), testRecord("other", 0, i))
			}
			produce(t, pc, recs...)

			// Group offsets on the source: mid-partition, at the end, at 0.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sadm := admin(t, src)
			offs := kadm.Offsets{}
			offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 7, LeaderEpoch: -1})
			offs.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 20, LeaderEpoch: -1})
			offs.Add(kadm.Offset{Topic: "orders", Partition: 2, At: 0, LeaderEpoch: -1})
			offs.Add(kadm.Offset{Topic: "events", Partition: 1, At: 13, LeaderEpoch: -1})
			if err := sadm.CommitAllOffsets(ctx, "billing", offs); err != nil {
				t.Fatal(err)
			}
			other := kadm.Offsets{}
			other.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 3, LeaderEpoch: -1})
			if err := sadm.CommitAllOffsets(ctx, "ignored", other); err != nil {
				t.Fatal(err)
			}

			rep := runMirror(t, ctx, Config{
				From: src.addrs, To: tgt.addrs, Once: true, MaxBatch: 7,
				Topics: regexp.MustCompile("orders|events"), Groups: regexp.MustCompile("bill.*"),
			})
			if want := expectedMode(t, tgt); rep.Mode != want {
				t.Errorf("mode %s, want %s", rep.Mode, want)
			}
			if rep.Records != 120 {
				t.Errorf("report: %d records copied, want 120", rep.Records)
			}
			if !slices.Equal(rep.Created, []string{"events", "orders"}) {
				t.Errorf("created %v, want events and orders", rep.Created)
			}
			if got := rep.SkippedConfigs["orders"]; !slices.Equal(got, []string{"min.insync.replicas=1"}) {
				t.Errorf("skipped configs %v, want min.insync.replicas=1", got)
			}
			t.Log(rep.String())

			tadm := admin(t, tgt)
			tds, err := tadm.ListTopics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tds.Has("other") {
				t.Error("topic other was mirrored; --topics excludes it")
			}
			for topic, n := range map[string]int{"orders": 3, "events": 2} {
				if got := len(tds[topic].Partitions); got != n {
					t.Errorf("target %s: %d partitions, want %d", topic, got, n)
				}
			}
			rcs, err := tadm.DescribeTopicConfigs(ctx, "orders")
			if err != nil {
				t.Fatal(err)
			}
			rc, err := rcs.On("orders", nil)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, c := range rc.Configs {
				if c.Key == "retention.ms" && c.Value != nil && *c.Value == "3600000" {
					found = true
				}
			}
			if !found {
				t.Error("target orders lacks retention.ms=3600000")
			}

			if n := equalTopics(t, src, tgt, "orders") + equalTopics(t, src, tgt, "events"); n != 120 {
				t.Errorf("%d records compared, want 120", n)
			}

			// The target group points at the same records as the source one.
			srcRecs := map[string]map[int32][]rec{"orders": readAll(t, src, "orders"), "events": readAll(t, src, "events")}
			tgtRecs := map[string]map[int32][]rec{"orders": readAll(t, tgt, "orders"), "events": readAll(t, tgt, "events")}
			got, err := tadm.FetchOffsets(ctx, "billing")
			if err != nil {
				t.Fatal(err)
			}
			offs.Each(func(o kadm.Offset) {
				g, ok := got.Lookup(o.Topic, o.Partition)
				if !ok || g.Err != nil {
					t.Errorf("target group billing has no offset for %s/%d (%v)", o.Topic, o.Partition, g.Err)
					return
				}
				want := firstAtOrAfter(srcRecs[o.Topic][o.Partition], o.At)
				have := firstAtOrAfter(tgtRecs[o.Topic][o.Partition], g.At)
				if want != have {
					t.Errorf("%s/%d: source offset %d is record #%d, target offset %d is record #%d", o.Topic, o.Partition, o.At, want, g.At, have)
				}
			})
			if gs, err := tadm.FetchOffsets(ctx, "ignored"); err == nil && len(gs) > 0 {
				t.Errorf("group ignored was written to the target: %v", gs)
			}

			// A second --once run copies nothing, and translates offsets
			// the group committed meanwhile inside what the first run
			// copied (found on the target by content).
			moved := kadm.Offsets{}
			moved.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 11, LeaderEpoch: -1})
			moved.Add(kadm.Offset{Topic: "orders", Partition: 2, At: 19, LeaderEpoch: -1})
			if err := sadm.CommitAllOffsets(ctx, "billing", moved); err != nil {
				t.Fatal(err)
			}
			rep = runMirror(t, ctx, Config{From: src.addrs, To: tgt.addrs, Once: true, Topics: regexp.MustCompile("orders|events")})
			if rep.Records != 0 || !rep.Resumed {
				t.Errorf("second run: %d records, resumed %v; want 0 and true", rep.Records, rep.Resumed)
			}
			if g := rep.Groups["billing"]; g.Skipped != "" || len(g.Offsets["orders"]) != 3 {
				t.Errorf("second run, group billing: %+v", g)
			}
			equalTopics(t, src, tgt, "orders")
			got, err = tadm.FetchOffsets(ctx, "billing")
			if err != nil {
				t.Fatal(err)
			}
			moved.Each(func(o kadm.Offset) {
				g, _ := got.Lookup(o.Topic, o.Partition)
				want := firstAtOrAfter(srcRecs[o.Topic][o.Partition], o.At)
				if have := firstAtOrAfter(tgtRecs[o.Topic][o.Partition], g.At); g.Err != nil || want != have {
					t.Errorf("second run: %s/%d: source offset %d is record #%d, target offset %d is record #%d (%v)", o.Topic, o.Partition, o.At, want, g.At, have, g.Err)
				}
			})
		})
	}
}

// firstAtOrAfter is the index of the first record at or after offset, or
// len(rs) when there is none.
func firstAtOrAfter(rs []rec, offset int64) int {
	for i, r := range rs {
		if r.Offset >= offset {
			return i
		}
	}
	return len(rs)
}

// TestLargeRecords copies records larger than franz-go's default batch
// limit when the source topic allows them.
func TestLargeRecords(t *testing.T) {
	for _, d := range directions {
		t.Run(d.name, func(t *testing.T) {
			src, tgt := d.from(t), d.to(t)
			createTopic(t, src, "big", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("4194304")})
			cl := client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(4194304))
			r := testRecord("big", 0, 1)
			r.Value = make([]byte, 2<<20)
			for i := range r.Value {
				r.Value[i] = byte(i * 7)
			}
			produce(t, cl, r, testRecord("big", 0, 2))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			runMirror(t, ctx, Config{From: src.addrs, To: tgt.addrs, Once: true})
			if n := equalTopics(t, src, tgt, "big"); n != 2 {
				t.Fatalf("%d records compared, want 2", n)
			}
		})
	}
}
