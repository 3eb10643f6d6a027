// Package repair checks and repairs the partition logs of a Sluice data
// directory offline: the logic behind `sluice repair`.
package repair

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/internal/groups"
	"github.com/sluicedb/sluice/internal/kvlog"
	"github.com/sluicedb/sluice/internal/meta"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/txn"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// Options choose what Run checks and whether it cuts.
type Options struct {
	Data      string // the data directory
	Topic     string // only this topic; "" for every topic
	Partition int32  // only this partition of Topic; -1 for all
	// Truncate cuts each corrupt log at its last valid batch (a copy of
	// everything removed is kept as *.broken). Without it Run only
	// reports.
	Truncate bool
}

// ErrCorrupt is returned by a Run without Truncate that found corruption.
var ErrCorrupt = errors.New("repair: corrupt partitions found; run again with --truncate-after-corruption to cut them at the last valid batch")

// Run takes the data directory's lock (refusing a directory a broker
// holds), checks every selected partition log and, with Truncate,
// repairs the corrupt ones. It prints what it found and removed to out.
func Run(fs vfs.FS, o Options, out io.Writer) ([]storage.RepairReport, error) {
	if o.Data == "" {
		return nil, errors.New("repair: no data directory given")
	}
	layout := meta.Layout{Root: o.Data}
	if _, err := fs.Stat(layout.TopicsDir()); err != nil {
		return nil, fmt.Errorf("repair: %s does not look like a Sluice data directory: %w", o.Data, err)
	}
	lock, err := storage.LockDir(fs, o.Data, layout.Lock())
	if err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	defer lock.Unlock()
	dirs, err := logDirs(fs, o)
	if err != nil {
		return nil, err
	}
	rp, err := inspectWAL(fs, o.Data, out)
	if err != nil {
		return nil, err
	}
	var reps []storage.RepairReport
	corrupt := false
	for _, d := range dirs {
		rep, err := storage.Repair(fs, d.path, o.Truncate)
		reps = append(reps, rep)
		if err != nil {
			return reps, fmt.Errorf("repair: %s: %w", d.name, err)
		}
		printReport(out, d.name, rep)
		if rp != nil && d.walKey != nil {
			printPending(out, d.name, rep, rp, *d.walKey)
		}
		corrupt = corrupt || (rep.Corruption != nil && !rep.Truncated)
	}
	if corrupt {
		return reps, ErrCorrupt
	}
	return reps, nil
}

type logDir struct {
	name   string // "topic/partition", or "groups" / "transactions" for a coordinator's log
	path   string
	walKey *wal.Key // the log's key in the write-ahead log; nil when unknown
}

// logDirs lists the selected logs: topics/<name>/<n>, and without a
// topic also the group and transaction coordinators' live logs
// (groups/CURRENT and transactions/CURRENT name them).
func logDirs(fs vfs.FS, o Options) ([]logDir, error) {
	layout := meta.Layout{Root: o.Data}
	root := layout.TopicsDir()
	topics := []string{o.Topic}
	if o.Topic == "" {
		var err error
		if topics, err = fs.ReadDir(root); err != nil {
			return nil, fmt.Errorf("repair: list topics: %w", err)
		}
	}
	var dirs []logDir
	for _, t := range topics {
		id, idOK := topicID(fs, layout, t)
		ents, err := fs.ReadDir(layout.TopicDir(t))
		if errors.Is(err, os.ErrNotExist) && o.Topic != "" {
			return nil, fmt.Errorf("repair: topic %q does not exist in %s", o.Topic, o.Data)
		}
		if err != nil {
			return nil, fmt.Errorf("repair: list %s: %w", t, err)
		}
		for _, e := range ents {
			n, ok := meta.ParsePartitionDir(e)
			if !ok || (o.Partition >= 0 && n != o.Partition) {
				continue
			}
			d := logDir{name: t + "/" + e, path: layout.PartitionDir(t, n)}
			if idOK {
				d.walKey = &wal.Key{Topic: id, Partition: n}
			}
			dirs = append(dirs, d)
		}
	}
	if o.Topic == "" {
		for _, sub := range []string{groups.WALName, txn.WALName} {
			if d, gen, ok := coordinatorLog(fs, layout.CoordinatorDir(sub)); ok {
				k := kvlog.WALKey(sub, gen)
				dirs = append(dirs, logDir{name: sub, path: d, walKey: &k})
			}
		}
	}
	if o.Topic != "" && o.Partition >= 0 && len(dirs) == 0 {
		return nil, fmt.Errorf("repair: partition %s/%d does not exist in %s", o.Topic, o.Partition, o.Data)
	}
	return dirs, nil
}

// coordinatorLog returns the live log directory of the coordinator whose
// state is in dir (its CURRENT file names it) and its generation, if any.
func coordinatorLog(fs vfs.FS, dir string) (string, int, bool) {
	f, err := fs.Open(filepath.Join(dir, "CURRENT"))
	if err != nil {
		return "", 0, false
	}
	defer f.Close()
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	name := strings.TrimSpace(string(b[:n]))
	gen, err := strconv.Atoi(strings.TrimPrefix(name, "log-"))
	if !strings.HasPrefix(name, "log-") || err != nil || gen <= 0 {
		return "", 0, false
	}
	d := filepath.Join(dir, name)
	if _, err := fs.Stat(d); err != nil {
		return "", 0, false
	}
	return d, gen, true
}

// topicID reads a topic's ID from its topic.json.
func topicID(fs vfs.FS, layout meta.Layout, topic string) ([16]byte, bool) {
	var id [16]byte
	m, err := layout.ReadTopic(fs, topic)
	if err != nil {
		return id, false
	}
	raw, err := hex.DecodeString(m.ID)
	if err != nil || len(raw) != len(id) {
		return id, false
	}
	copy(id[:], raw)
	return id, true
}

// inspectWAL reads the write-ahead log a stopped broker left in
// data/wal, without changing it, and prints the damage found in it. It
// returns nil when there is none.
func inspectWAL(fs vfs.FS, data string, out io.Writer) (*wal.Replay, error) {
	dir := meta.Layout{Root: data}.WALDir()
	if _, err := fs.Stat(dir); err != nil {
		return nil, nil
	}
	rp, ds, err := wal.Inspect(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("repair: read the write-ahead log: %w", err)
	}
	for _, d := range ds {
		fmt.Fprintf(out, "wal: segment %s does not decode at byte %d, but %d entries after it do: the broker's start replays only what comes before it, so the batches after it are lost unless the partitions' own files hold them (after a power loss they may be a write that was never acknowledged)\n", d.Segment, d.At, d.After)
	}
	return rp, nil
}

// printPending says what the write-ahead log holds for a log: batches
// acknowledged and durable there, which the broker's next start writes
// into the log where they continue it.
func printPending(out io.Writer, name string, r storage.RepairReport, rp *wal.Replay, k wal.Key) {
	first, end, n := rp.Pending(k)
	if n == 0 {
		return
	}
	fmt.Fprintf(out, "%s: the write-ahead log holds offsets %d to %d (%d entries); the broker's next start writes those after the log's end into it\n", name, first, end-1, n)
	if c := r.Corruption; c != nil && c.Offset >= first && c.Offset < end {
		verb := "a cut there"
		if r.Truncated {
			verb = "the cut"
		}
		fmt.Fprintf(out, "%s: it holds the corrupt offset %d: after %s, the next start restores the offsets it holds from there\n", name, c.Offset, verb)
	}
}

func printReport(out io.Writer, name string, r storage.RepairReport) {
	if r.Corruption == nil {
		fmt.Fprintf(out, "%s: ok\n", name)
		return
	}
	c := r.Corruption
	fmt.Fprintf(out, "%s: corrupt segment %s at byte %d (offset %d): %v\n", name, c.Segment, c.Position, c.Offset, c.Err)
	verb := "would remove"
	if r.Truncated {
		verb = "removed"
	}
	last := "no valid batch after it"
	if r.LastOffset >= 0 {
		last = fmt.Sprintf("valid batches up to offset %d after it", r.LastOffset)
	}
	fmt.Fprintf(out, "%s: %s offsets from %d (%s), %d bytes, and %d later segment(s)\n",
		name, verb, r.FirstOffset, last, r.RemovedBytes, len(r.LaterSegments))
	for _, p := range r.Copies {
		fmt.Fprintf(out, "%s: kept a copy at %s\n", name, p)
	}
}
