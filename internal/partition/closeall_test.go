package partition

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/vfs"
)

// TestCloseAllReusesFiles closes several partitions together again and
// again, each time after writing to them: each reopens with its producer
// state from a snapshot at the log end (scanning nothing), keeps the
// newest SnapshotKeep snapshots, and once it holds that many a close
// creates no file and removes none (index files, checkpoints and
// snapshots are written over in place); a close with nothing written
// since the open writes no snapshot.
func TestCloseAllReusesFiles(t *testing.T) {
	fs := vfs.NewMem()
	const parts = 3
	dir := func(i int) string { return filepath.Join("/data/topics/t", string(rune('0'+i))) }
	open := func(create bool) []*Partition {
		ps := make([]*Partition, parts)
		for i := range ps {
			p, err := Open(Config{FS: fs, Dir: dir(i), Topic: "t", Index: int32(i), Create: create,
				Storage: storage.Config{Preallocate: -1}, Acceptor: acceptor.Config{RetentionCheck: -1}})
			if err != nil {
				t.Fatal(err)
			}
			ps[i] = p
		}
		return ps
	}
	var creates, removes, snapWrites int
	fs.Inject(func(op vfs.Op) error { // runs under the MemFS's lock
		switch op.Kind {
		case vfs.OpCreate:
			creates++
		case vfs.OpRemove:
			removes++
		case vfs.OpWrite:
			if strings.HasPrefix(filepath.Base(op.Name), snapshotPrefix) {
				snapWrites++
			}
		}
		return nil
	})
	defer fs.Inject(nil)
	ps := open(true)
	for round := range snapshotKeep + 2 {
		if round > 0 {
			ps = open(false)
			for i, p := range ps {
				if from, ok := p.RecoveredFrom(); !ok || from != p.NextOffset() || !p.Log().Recovery().Clean {
					t.Fatalf("round %d: partition %d scanned from %d (snapshot %v, clean %v), log end %d",
						round, i, from, ok, p.Log().Recovery().Clean, p.NextOffset())
				}
			}
		}
		written := round < snapshotKeep+1 // the last round closes without writing
		for i, p := range ps {
			if !written {
				break
			}
			var ap Append
			if _, err := appendBatch(t, p, idemBatch(int64(10+i), 0, int32(3*round), 3), &ap); err != nil {
				t.Fatalf("round %d: append to %d: %v", round, i, err)
			}
		}
		creates, removes, snapWrites = 0, 0, 0
		if err := CloseAll(ps); err != nil {
			t.Fatal(err)
		}
		for i := range ps {
			offs, err := listSnapshots(fs, dir(i))
			if err != nil {
				t.Fatal(err)
			}
			if len(offs) != min(round+1, snapshotKeep) || offs[len(offs)-1] != int64(3*min(round+1, snapshotKeep+1)) {
				t.Fatalf("round %d: partition %d keeps snapshots %v", round, i, offs)
			}
		}
		switch {
		case round >= snapshotKeep && (creates != 0 || removes != 0):
			t.Fatalf("round %d: the close created %d files and removed %d", round, creates, removes)
		case !written && snapWrites != 0:
			t.Fatalf("round %d: the close wrote %d times to snapshots with nothing new in them", round, snapWrites)
		}
	}
	for _, p := range open(false) {
		want := p.DescribeState()
		got, err := p.RescanState()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("state from the snapshot\n%s\nfull scan\n%s", want, got)
		}
		if err := p.CloseClean(); err != nil {
			t.Fatal(err)
		}
	}
}
