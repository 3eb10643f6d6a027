package storage

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/vfs"
)

// TestDirSyncsShareRounds: callers that arrive while a round of
// directory syncs runs share the next one, each directory synced once
// in it, and every caller returns once its directories are durable.
func TestDirSyncsShareRounds(t *testing.T) {
	const logs = 8
	fs := vfs.NewMem()
	if err := vfs.MkdirAllDurable(fs, "/t"); err != nil {
		t.Fatal(err)
	}
	for i := range logs {
		if err := fs.MkdirAll(fmt.Sprintf("/t/%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	gate := make(chan struct{})
	var mu sync.Mutex
	synced := map[string]int{}
	first := true
	fs.Inject(func(op vfs.Op) error {
		if op.Kind != vfs.OpSyncDir {
			return nil
		}
		mu.Lock()
		synced[op.Name]++
		wait := first
		first = false
		mu.Unlock()
		if wait {
			<-gate // the first round holds until the others queue
		}
		return nil
	})
	d := NewDirSyncs(fs)
	errs := make(chan error, logs)
	go func() { errs <- d.sync("/t/0", "/t") }()
	// The first round is running (its first sync is held) once the
	// gate's hook has been entered.
	for deadline := time.Now().Add(10 * time.Second); ; {
		mu.Lock()
		started := !first
		mu.Unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first round did not start")
		}
		time.Sleep(time.Millisecond)
	}
	for i := 1; i < logs; i++ {
		go func() { errs <- d.sync(fmt.Sprintf("/t/%d", i), "/t") }()
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		d.mu.Lock()
		queued := 0
		if d.next != nil {
			queued = len(d.next.dirs)
		}
		d.mu.Unlock()
		if queued == logs { // the other logs' directories and /t, once
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d directories queued, want %d", queued, logs)
		}
		time.Sleep(time.Millisecond)
	}
	close(gate)
	for range logs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if synced["/t"] != 2 {
		t.Fatalf("/t synced %d times, want 2 (one per round)", synced["/t"])
	}
	for i := range logs {
		if n := synced[fmt.Sprintf("/t/%d", i)]; n != 1 {
			t.Fatalf("/t/%d synced %d times, want 1", i, n)
		}
	}
	crashed := fs.CrashClone(vfs.CrashOptions{})
	for i := range logs {
		if _, err := crashed.Stat(fmt.Sprintf("/t/%d", i)); err != nil {
			t.Fatalf("after a power cut: %v", err)
		}
	}
}
