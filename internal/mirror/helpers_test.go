package mirror

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/broker/brokertest"
)

func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_MIRROR_KILL_CHILD") != "" {
		os.Exit(m.Run()) // the child of TestKillRestart is killed, never checked for leaks
	}
	goleak.VerifyTestMain(m)
}

// cluster is one side of a mirror in a test.
type cluster struct {
	name  string
	addrs []string
}

func sluiceCluster(t testing.TB) cluster {
	b := brokertest.Start(t)
	return cluster{name: "sluice", addrs: []string{b.Addr()}}
}

// kfakeCluster stands in for Kafka: three brokers, in process.
func kfakeCluster(t testing.TB) cluster {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return cluster{name: "kfake", addrs: c.ListenAddrs()}
}

// direction is a source and target pair.
type direction struct {
	name     string
	from, to func(testing.TB) cluster
}

var directions = []direction{
	{"sluice-to-kfake", sluiceCluster, kfakeCluster},
	{"kfake-to-sluice", kfakeCluster, sluiceCluster},
}

// expectedMode is the mode the mirror must pick for target c: kfake has
// transactions; Sluice has them once it advertises the transactional APIs.
func expectedMode(t testing.TB, c cluster) Mode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vs, err := admin(t, c).ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if _, ok := v.KeyMaxVersion(kmsg.EndTxn.Int16()); !ok {
			return IdempotentCheckpoint
		}
		if _, ok := v.KeyMaxVersion(kmsg.TxnOffsetCommit.Int16()); !ok {
			return IdempotentCheckpoint
		}
	}
	return Transactional
}

func client(t testing.TB, c cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func admin(t testing.TB, c cluster) *kadm.Client {
	return kadm.NewClient(client(t, c))
}

func createTopic(t testing.TB, c cluster, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin(t, c).CreateTopic(ctx, partitions, -1, configs, topic); err != nil {
		t.Fatalf("create %s on %s: %v", topic, c.name, err)
	}
}

// testRecord is the i-th record of a test topic: every field set, and
// distinct per record.
func testRecord(topic string, partition int32, i int) *kgo.Record {
	r := &kgo.Record{
		Topic:     topic,
		Partition: partition,
		Key:       fmt.Appendf(nil, "k-%s-%d-%d", topic, partition, i),
		Value:     bytes.Repeat(fmt.Appendf(nil, "v%d.", i), 1+i%7),
		Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)*1000 + int64(partition)),
	}
	if i%3 != 0 {
		r.Headers = []kgo.RecordHeader{{Key: "h1", Value: fmt.Appendf(nil, "%d", i)}, {Key: "h2", Value: nil}}
	}
	if i%11 == 5 {
		r.Key = nil
	}
	return r
}

func produceClient(t testing.TB, c cluster) *kgo.Client {
	return client(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
}

func produce(t testing.TB, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// rec is what a test compares of a record.
type rec struct {
	Offset    int64
	Key       string
	NilKey    bool
	Value     string
	Headers   string
	Timestamp int64
}

func (r rec) same(o rec) bool {
	return r.Key == o.Key && r.NilKey == o.NilKey && r.Value == o.Value && r.Headers == o.Headers && r.Timestamp == o.Timestamp
}

func toRec(r *kgo.Record) rec {
	var h strings.Builder
	for _, x := range r.Headers {
		fmt.Fprintf(&h, "%s=%q(nil=%v);", x.Key, x.Value, x.Value == nil)
	}
	return rec{Offset: r.Offset, Key: string(r.Key), NilKey: r.Key == nil, Value: string(r.Value), Headers: h.String(), Timestamp: r.Timestamp.UnixMilli()}
}

// readAll reads every committed record of topic on c, to the end offsets
// read first, per partition (control records are read to reach the end
// and then dropped).
func readAll(t testing.TB, c cluster, topic string) map[int32][]rec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := admin(t, c).ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("end offsets of %s on %s: %v %v", topic, c.name, err, ends.Error())
	}
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		parts[o.Partition] = kgo.NewOffset().AtStart()
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	out := map[int32][]rec{}
	for p := range parts {
		out[p] = nil
	}
	if len(want) == 0 {
		return out
	}
	cl := client(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s on %s: %v (still waiting for %v)", topic, c.name, err, want)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("reading %s on %s: %v", topic, c.name, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], toRec(r))
			}
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

// equalTopics fails unless topic holds the same records, partition by
// partition and in order, on both clusters.
func equalTopics(t testing.TB, src, tgt cluster, topic string) int {
	t.Helper()
	a, b := readAll(t, src, topic), readAll(t, tgt, topic)
	n := 0
	for p, ra := range a {
		rb := b[p]
		if len(ra) != len(rb) {
			t.Fatalf("%s/%d: %d records on the source %s, %d on the target %s", topic, p, len(ra), src.name, len(rb), tgt.name)
		}
		for i := range ra {
			if !ra[i].same(rb[i]) {
				t.Fatalf("%s/%d record %d differs:\nsource %+v\ntarget %+v", topic, p, i, ra[i], rb[i])
			}
		}
		n += len(ra)
	}
	return n
}

func runMirror(t testing.TB, ctx context.Context, cfg Config) *Report {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("mirror: %v", err)
	}
	return rep
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func regexpMust(s string) *regexp.Regexp { return regexp.MustCompile(s) }
