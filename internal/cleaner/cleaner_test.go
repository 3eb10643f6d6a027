package cleaner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// keyedLog opens a log on a MemFS holding updates over keys keys: n
// batches of one record each, all sealed.
func keyedLog(t *testing.T, n, keys int) *storage.Log {
	t.Helper()
	l, err := storage.Open(vfs.NewMem(), "/p", storage.Config{SegmentBytes: 1024, RetentionAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := 0; i < n; i++ {
		p := batch.Params{BaseOffset: int64(i)}.NoProducer()
		b, err := batch.Append(nil, &p, []batch.Record{{Timestamp: 1, Key: []byte(fmt.Sprint("k", i%keys)), Value: []byte(fmt.Sprint("v", i))}})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(b, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestPickDirtiest: of two qualifying logs the dirtier is cleaned first;
// a log below its min.cleanable.dirty.ratio is left alone.
func TestPickDirtiest(t *testing.T) {
	few := keyedLog(t, 100, 50)  // half the records are superseded
	many := keyedLog(t, 100, 2)  // nearly all are
	fresh := keyedLog(t, 100, 2) // as dirty, but its ratio threshold is not met
	targets := []Target{
		{Name: "few", Log: few, MinCleanableRatio: 0.5},
		{Name: "many", Log: many, MinCleanableRatio: 0.5},
		{Name: "fresh", Log: fresh, MinCleanableRatio: 1.01},
	}
	c := newCleaner(Config{Source: func() []Target { return targets }})
	// Both "few" and "many" are wholly dirty (ratio 1) at first: either
	// may go first, then the other; "fresh" never qualifies.
	seen := map[string]bool{}
	for range 2 {
		if !c.RunOnce(context.Background()) {
			t.Fatal("no pass ran while logs qualified")
		}
		seen[c.Stats().LastTarget] = true
	}
	if !seen["few"] || !seen["many"] || seen["fresh"] {
		t.Fatalf("cleaned %v", seen)
	}
	if c.RunOnce(context.Background()) {
		t.Fatalf("a pass ran with nothing dirty: %+v", c.Stats())
	}
	if st := c.Stats(); st.RecordsRemoved == 0 || st.Failures != 0 || st.BytesProcessed < st.BytesRead+st.BytesWritten {
		t.Fatalf("stats %+v", st)
	}
	// A tombstone-free, fully cleaned log with a max lag qualifies only
	// when dirty again.
	st, err := fresh.CleanStats(time.Now(), 0, 0)
	if err != nil || st.DirtyBytes == 0 {
		t.Fatalf("fresh stats %+v %v", st, err)
	}
	targets[2].MaxCompactionLag = time.Millisecond // overdue: its records are from 1970
	if !c.RunOnce(context.Background()) || c.Stats().LastTarget != "fresh" {
		t.Fatalf("an overdue log was not cleaned: %+v", c.Stats())
	}
}

// TestBackgroundWakeAndClose: Start runs a pass when woken and Close
// stops the goroutine (goleak checks it is gone).
func TestBackgroundWakeAndClose(t *testing.T) {
	l := keyedLog(t, 200, 3)
	asked := make(chan struct{}, 16)
	c := Start(Config{
		Interval: time.Hour,
		Source: func() []Target {
			select {
			case asked <- struct{}{}:
			default:
			}
			return []Target{{Name: "p", Log: l, MinCleanableRatio: 0.1}}
		},
	})
	<-asked // the first look, at start
	for c.Stats().Passes == 0 {
		c.Wake()
		<-asked
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if st := c.Stats(); st.RecordsRemoved == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestLimiter: a rate limit makes the pass wait, and cancelling the
// context ends the wait with its error (the pass aborts unchanged).
func TestLimiter(t *testing.T) {
	if err := newLimiter(math.Inf(1)).wait(context.Background(), 1<<30); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	lim := newLimiter(1) // one byte per second: a megabyte is far in the future
	if err := lim.wait(ctx, 1<<20); !errors.Is(err, context.Canceled) {
		t.Fatalf("throttled wait with a cancelled context: %v", err)
	}
	l := keyedLog(t, 100, 2)
	res, err := l.Clean(ctx, storage.CleanOptions{Throttle: lim.wait})
	if err == nil || res.SegmentsWritten != 0 {
		t.Fatalf("throttled pass with a cancelled context: %+v %v", res, err)
	}
}
