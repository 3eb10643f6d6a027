package broker

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/vfs"
)

const shutdownTopic, shutdownParts = "sd", 3

// shutdownWALBytes keeps the WAL's segments (zeroed ahead, in memory on
// the crash FS) small: the test keeps dozens of broker images.
const shutdownWALBytes = 1 << 20

// shutdownWorkload starts a broker (WAL on, the default) on mem and
// produces with acks=all to every partition: in round 0 it makes the
// topic and writes idempotent records, and on partition 0 a committed
// and an aborted transaction and one left open; in later rounds, more
// idempotent records. It returns the broker with everything
// acknowledged.
func shutdownWorkload(t *testing.T, mem *vfs.MemFS, round int) *Broker {
	t.Helper()
	b := openBroker(t, "/data", "127.0.0.1:0", withFS(mem), withWALSegmentBytes(shutdownWALBytes)) // the caller closes it
	ctx := txnCtx(t)
	if round == 0 {
		if err := b.CreateTopic(ctx, shutdownTopic, shutdownParts, nil); err != nil {
			t.Fatal(err)
		}
	}
	idem, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic(shutdownTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 - round {
		for p := range int32(shutdownParts) {
			r := &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "r%d-%d-%d", round, p, i)}
			if err := idem.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	idem.Close()
	if round > 0 {
		return b
	}
	tx, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("sd-tx"), kgo.DefaultProduceTopic(shutdownTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	produceTxn(t, tx, shutdownTopic, true, "committed")
	produceTxn(t, tx, shutdownTopic, false, "aborted")
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tx.Close() // the transaction stays open
	return b
}

// shutdownState is what a partition holds: its log's bytes and its
// producer state.
type shutdownState struct {
	log   []byte
	state string
}

func partitionBytes(t *testing.T, p *partition.Partition) []byte {
	t.Helper()
	l := p.Log()
	var out []byte
	for off, end := l.StartOffset(), l.NextOffset(); off < end; {
		s, err := l.Read(off, end, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		_, next := s.Offsets()
		if next <= off {
			t.Fatalf("read at %d returned nothing below the end %d", off, end)
		}
		out, off = append(out, b...), next
	}
	return out
}

func shutdownStates(t *testing.T, b *Broker) []shutdownState {
	t.Helper()
	var out []shutdownState
	for i := range int32(shutdownParts) {
		p := b.partition(shutdownTopic, i)
		out = append(out, shutdownState{partitionBytes(t, p), partitionState(p)})
	}
	return out
}

// TestCleanShutdownCrashAtEveryBoundary cuts the power before each
// mutating filesystem operation of a broker's clean shutdown (Close) of
// a topic's partitions, the second time the broker closes (so that the
// close writes over the index files, checkpoints and snapshots of the
// first), with and without torn writes: the broker restarted on what
// the cut left holds every acknowledged record at its offset, and the
// producer state (idempotent producers, open and aborted transactions)
// it had, equal to a scan of the whole log. Without a cut, the restart
// scans nothing: every partition opens clean and from its snapshot at
// the log end.
func TestCleanShutdownCrashAtEveryBoundary(t *testing.T) {
	first := vfs.NewMem()
	if err := shutdownWorkload(t, first, 0).Close(); err != nil {
		t.Fatal(err)
	}
	// run starts from what the first clean shutdown left (all durable, so
	// a crash image of it is a copy of it) and writes the second round.
	run := func(t *testing.T) (*vfs.MemFS, *Broker) {
		mem := first.CrashClone(vfs.CrashOptions{})
		return mem, shutdownWorkload(t, mem, 1)
	}
	check := func(t *testing.T, fs *vfs.MemFS, want []shutdownState, what string) *Broker {
		t.Helper()
		rb, err := New(DataDir("/data"), ListenAddr("127.0.0.1:0"), withFS(fs), withWALSegmentBytes(shutdownWALBytes))
		if err != nil {
			t.Fatalf("%s: restart: %v", what, err)
		}
		ok := false
		defer func() {
			if !ok {
				rb.Close()
			}
		}()
		got := shutdownStates(t, rb)
		for i := range want {
			p := rb.partition(shutdownTopic, int32(i))
			if !bytes.Equal(got[i].log, want[i].log) {
				t.Fatalf("%s: partition %d holds %d bytes up to offset %d, had %d acknowledged", what, i, len(got[i].log), p.NextOffset(), len(want[i].log))
			}
			if got[i].state != want[i].state {
				t.Fatalf("%s: partition %d producer state\n%s\nbefore the shutdown\n%s", what, i, got[i].state, want[i].state)
			}
			if rescan := rescanState(t, p); got[i].state != rescan {
				t.Fatalf("%s: partition %d producer state\n%s\nfull scan\n%s", what, i, got[i].state, rescan)
			}
		}
		ok = true
		return rb
	}

	mem, b := run(t)
	want := shutdownStates(t, b)
	base := mem.Seq()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ops := mem.Seq() - base
	rb := check(t, mem.CrashClone(vfs.CrashOptions{}), want, "after the whole shutdown")
	for i := range int32(shutdownParts) {
		p := rb.partition(shutdownTopic, i)
		if !p.Log().Recovery().Clean || !fromSnap(p) || scanned(p) != p.NextOffset() {
			t.Fatalf("partition %d after a clean shutdown: clean %v, scanned from %d (snapshot %v) of %d",
				i, p.Log().Recovery().Clean, scanned(p), fromSnap(p), p.NextOffset())
		}
	}
	rb.Close()

	rng := rand.New(rand.NewPCG(1, 2))
	points, step := 0, int64(1)
	if testing.Short() {
		step = 4 // every fourth point
	}
	for k := int64(1); ; k += step {
		mem, b := run(t)
		want := shutdownStates(t, b)
		tear := k%2 == 0
		cut := mem.CrashBefore(mem.Seq()+k, vfs.CrashOptions{Tear: tear, Rand: rng})
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		crashed := cut()
		if crashed == nil {
			if k <= ops/2 {
				t.Fatalf("the shutdown made fewer than %d operations; the first made %d", k, ops)
			}
			break
		}
		points++
		check(t, crashed, want, fmt.Sprintf("cut before op %d of the shutdown (tear %v)", k, tear)).Close()
	}
	t.Logf("%d crash points (the uncut shutdown made %d operations)", points, ops)
}
