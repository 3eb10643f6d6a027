// Package repair checks and repairs the partition logs of a Sluice data
// directory offline: the logic behind `sluice repair`.
package repair

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sluice/internal/storage"
	"sluice/internal/vfs"
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
	if _, err := fs.Stat(filepath.Join(o.Data, "topics")); err != nil {
		return nil, fmt.Errorf("repair: %s does not look like a Sluice data directory: %w", o.Data, err)
	}
	lock, err := storage.LockDir(fs, o.Data)
	if err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	defer lock.Unlock()
	dirs, err := logDirs(fs, o)
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
		corrupt = corrupt || (rep.Corruption != nil && !rep.Truncated)
	}
	if corrupt {
		return reps, ErrCorrupt
	}
	return reps, nil
}

type logDir struct {
	name string // "topic/partition", or "groups" / "transactions" for a coordinator's log
	path string
}

// logDirs lists the selected logs: topics/<name>/<n>, and without a
// topic also the group and transaction coordinators' live logs
// (groups/CURRENT and transactions/CURRENT name them).
func logDirs(fs vfs.FS, o Options) ([]logDir, error) {
	root := filepath.Join(o.Data, "topics")
	topics := []string{o.Topic}
	if o.Topic == "" {
		var err error
		if topics, err = fs.ReadDir(root); err != nil {
			return nil, fmt.Errorf("repair: list topics: %w", err)
		}
	}
	var dirs []logDir
	for _, t := range topics {
		ents, err := fs.ReadDir(filepath.Join(root, t))
		if errors.Is(err, os.ErrNotExist) && o.Topic != "" {
			return nil, fmt.Errorf("repair: topic %q does not exist in %s", o.Topic, o.Data)
		}
		if err != nil {
			return nil, fmt.Errorf("repair: list %s: %w", t, err)
		}
		for _, e := range ents {
			n, err := strconv.ParseInt(e, 10, 32)
			if err != nil || strconv.FormatInt(n, 10) != e || (o.Partition >= 0 && n != int64(o.Partition)) {
				continue
			}
			dirs = append(dirs, logDir{name: t + "/" + e, path: filepath.Join(root, t, e)})
		}
	}
	if o.Topic == "" {
		for _, sub := range []string{"groups", "transactions"} {
			if d, ok := coordinatorLog(fs, o.Data, sub); ok {
				dirs = append(dirs, logDir{name: sub, path: d})
			}
		}
	}
	if o.Topic != "" && o.Partition >= 0 && len(dirs) == 0 {
		return nil, fmt.Errorf("repair: partition %s/%d does not exist in %s", o.Topic, o.Partition, o.Data)
	}
	return dirs, nil
}

// coordinatorLog returns the live log directory of the coordinator whose
// state is in data/sub (its CURRENT file names it), if any.
func coordinatorLog(fs vfs.FS, data, sub string) (string, bool) {
	f, err := fs.Open(filepath.Join(data, sub, "CURRENT"))
	if err != nil {
		return "", false
	}
	defer f.Close()
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	name := strings.TrimSpace(string(b[:n]))
	if !strings.HasPrefix(name, "log-") || strings.ContainsAny(name, "/\\") {
		return "", false
	}
	d := filepath.Join(data, sub, name)
	if _, err := fs.Stat(d); err != nil {
		return "", false
	}
	return d, true
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
