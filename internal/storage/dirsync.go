package storage

import (
	"sync"

	"github.com/sluicedb/sluice/internal/vfs"
)

// DirSyncs batches the directory syncs of new logs' first Syncs
// (Config.DirSyncs, shared by the logs of one broker on one filesystem):
// the first Syncs of many logs made by Create, which run at once when the
// WAL asks partitions written a little to checkpoint, then share their
// topic directory's sync and one vfs.SyncDirs (one syncfs for many
// directories on Linux) instead of two fsyncs each. A caller adds its
// directories to the next round and waits for it; while no round runs
// the caller leads it, and then the rounds whose callers arrived
// meanwhile.
type DirSyncs struct {
	fs      vfs.FS
	mu      sync.Mutex // guards next and running
	next    *dirRound  // collecting: run after the running one
	running bool
}

// NewDirSyncs returns a batcher of directory syncs on fs.
func NewDirSyncs(fs vfs.FS) *DirSyncs { return &DirSyncs{fs: fs} }

type dirRound struct {
	dirs []string
	seen map[string]bool
	done chan struct{}
	err  error // set before done is closed
}

// sync returns once a round that started after the call has synced
// dirs, with that round's error.
func (b *DirSyncs) sync(dirs ...string) error {
	b.mu.Lock()
	if b.next == nil {
		b.next = &dirRound{seen: map[string]bool{}, done: make(chan struct{})}
	}
	r := b.next
	for _, d := range dirs {
		if !r.seen[d] {
			r.seen[d] = true
			r.dirs = append(r.dirs, d)
		}
	}
	if b.running {
		b.mu.Unlock()
		<-r.done
		return r.err
	}
	b.running = true
	for {
		run := b.next
		b.next = nil
		b.mu.Unlock()
		run.err = vfs.SyncDirs(b.fs, run.dirs)
		close(run.done)
		b.mu.Lock()
		if b.next == nil {
			b.running = false
			b.mu.Unlock()
			return r.err
		}
	}
}
