package mirror

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// closedAddr is an address nothing listens on.
const closedAddr = "127.0.0.1:1"

func TestBadInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, tgt := sluiceCluster(t), kfakeCluster(t)
	createTopic(t, src, "t1", 3, nil)
	createTopic(t, src, "t2", 2, nil)
	produce(t, produceClient(t, src), testRecord("t1", 0, 1), testRecord("t2", 1, 2))
	createTopic(t, tgt, "t2", 1, nil)

	for _, tc := range []struct {
		name     string
		from, to []string
		want     []string
	}{
		{"unreachable source", []string{closedAddr}, tgt.addrs, []string{"source " + closedAddr + " unreachable"}},
		{"unreachable target", src.addrs, []string{closedAddr}, []string{"target " + closedAddr + " unreachable"}},
		{"fewer target partitions", src.addrs, tgt.addrs, []string{"fewer partitions", "t2 has 1 partitions on the target, 2 on the source"}},
		{"no source topic", src.addrs, tgt.addrs, nil},
		{"same cluster", src.addrs, src.addrs, []string{"are the same cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{From: tc.from, To: tc.to, Once: true, Timeout: time.Second, Logger: quietLogger()}
			if tc.want == nil {
				cfg.Topics = regexpMust("nope.*")
				tc.want = []string{"no source topic matches"}
			}
			_, err := Run(ctx, cfg)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			// Nothing was written: t1 was not created, t2 is untouched.
			tds, err := admin(t, tgt).ListTopics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tds.Has("t1") {
				t.Error("t1 was created on the target")
			}
			if n := len(readAll(t, tgt, "t2")[0]); n != 0 {
				t.Errorf("%d records written to the target's t2", n)
			}
		})
	}
}

// TestSourceTopicDeletedMidMirror: the mirror stops with an error naming
// the topic, and the target holds a prefix of the source's records per
// partition, with nothing half written.
func TestSourceTopicDeletedMidMirror(t *testing.T) {
	for _, d := range directions {
		t.Run(d.name, func(t *testing.T) {
			src, tgt := d.from(t), d.to(t)
			const topic = "doomed"
			createTopic(t, src, topic, 2, nil)
			pc := produceClient(t, src)
			var recs []*kgo.Record
			for i := range 400 {
				r := testRecord(topic, int32(i%2), i)
				r.Value = append(r.Value, make([]byte, 16<<10)...) // a fetch holds a few dozen
				recs = append(recs, r)
			}
			produce(t, pc, recs...)
			before := readAll(t, src, topic)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// Delete the topic from the progress callback, which runs on
			// the mirror's goroutine: the mirror is mid-copy by design.
			adm := admin(t, src)
			deleted := false
			_, err := Run(ctx, Config{
				From: src.addrs, To: tgt.addrs, Interval: time.Millisecond, MaxBatch: 10, Logger: quietLogger(),
				Progress: func(s Stats) {
					if s.Records > 0 && !deleted {
						deleted = true
						if _, derr := adm.DeleteTopic(ctx, topic); derr != nil {
							t.Errorf("delete: %v", derr)
						}
					}
				},
			})
			if err == nil || !strings.Contains(err.Error(), "source topic doomed was deleted mid-mirror") {
				t.Fatalf("mirror error %v, want one saying the source topic was deleted", err)
			}
			after := readAll(t, tgt, topic)
			for p, rs := range after {
				if len(rs) > len(before[p]) {
					t.Fatalf("partition %d: %d records on the target, %d were on the source", p, len(rs), len(before[p]))
				}
				for i := range rs {
					if !rs[i].same(before[p][i]) {
						t.Fatalf("partition %d record %d: target %+v, source %+v", p, i, rs[i], before[p][i])
					}
				}
			}
			t.Logf("stopped with: %v", err)
		})
	}
}
