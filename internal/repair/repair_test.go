package repair

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/kvlog"
	"github.com/sluicedb/sluice/internal/meta"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

func makeLog(t *testing.T, fs vfs.FS, dir string) {
	t.Helper()
	l, err := storage.Open(fs, dir, storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(storagetest.MakeBatch(3, 10, 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRunSelection: Run checks the partitions asked for, names a missing
// topic or partition, and refuses a locked directory.
func TestRunSelection(t *testing.T) {
	m := vfs.NewMem()
	for _, d := range []string{"/data/topics/a/0", "/data/topics/a/1", "/data/topics/b/0", "/data/groups/log-000002", "/data/transactions/log-000001"} {
		makeLog(t, m, d)
	}
	f, _ := m.Create("/data/groups/CURRENT")
	f.Write([]byte("log-000002\n"))
	f.Close()
	f, _ = m.Create("/data/transactions/CURRENT")
	f.Write([]byte("log-000001\n"))
	f.Close()
	cases := []struct {
		o    Options
		want string // output, or the error when err is set
		err  bool
	}{
		{Options{Data: "/data", Partition: -1}, "a/0: ok\na/1: ok\nb/0: ok\ngroups: ok\ntransactions: ok\n", false},
		{Options{Data: "/data", Topic: "a", Partition: 1}, "a/1: ok\n", false},
		{Options{Data: "/data", Topic: "zzz", Partition: -1}, `topic "zzz" does not exist`, true},
		{Options{Data: "/data", Topic: "a", Partition: 7}, "partition a/7 does not exist", true},
		{Options{Data: "/nowhere", Partition: -1}, "does not look like a Sluice data directory", true},
	}
	for _, c := range cases {
		var out bytes.Buffer
		_, err := Run(m, c.o, &out)
		switch {
		case c.err && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: error %v, want one saying %q", c.o, err, c.want)
		case !c.err && (err != nil || out.String() != c.want):
			t.Errorf("%+v: %v, output %q, want %q", c.o, err, out.String(), c.want)
		}
	}
	u, err := storage.LockDir(m, "/data", meta.Layout{Root: "/data"}.Lock())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Unlock()
	if _, err := Run(m, Options{Data: "/data", Partition: -1}, &bytes.Buffer{}); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("Run on a locked directory: %v, want ErrLocked", err)
	}
}

// TestRunReportsWAL: Run says which offsets the write-ahead log holds
// for a partition and a coordinator log (the next start writes them),
// that it holds a corrupt offset a cut would remove, and damage inside
// the write-ahead log itself; it changes nothing without Truncate.
func TestRunReportsWAL(t *testing.T) {
	m := vfs.NewMem()
	makeLog(t, m, "/data/topics/a/0") // offsets 0..2
	f, _ := m.Create("/data/topics/a/topic.json")
	f.Write([]byte(`{"id":"0102030405060708090a0b0c0d0e0f10","partitions":1}`))
	f.Close()
	makeLog(t, m, "/data/groups/log-000003")
	f, _ = m.Create("/data/groups/CURRENT")
	f.Write([]byte("log-000003\n"))
	f.Close()

	var entries []walEntry
	for _, e := range []struct {
		k     wal.Key
		first int64
	}{{walPart, 3}, {walPart, 6}, {kvlog.WALKey("groups", 3), 3}, {kvlog.WALKey("groups", 2), 9}} {
		b, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(3, 10, e.first), e.first)
		entries = append(entries, walEntry{e.k, e.first, e.first + 3, b})
	}
	writeWAL(t, m, entries...)

	var out bytes.Buffer
	if _, err := Run(m, Options{Data: "/data", Partition: -1}, &out); err != nil {
		t.Fatal(err)
	}
	want := "a/0: ok\n" +
		"a/0: the write-ahead log holds offsets 3 to 8 (2 entries); the broker's next start writes those after the log's end into it\n" +
		"groups: ok\n" +
		"groups: the write-ahead log holds offsets 3 to 5 (1 entries); the broker's next start writes those after the log's end into it\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}

	// Damage the first entry of the WAL: three entries after it decode.
	names, _ := m.ReadDir("/data/wal")
	seg := "/data/wal/" + names[0]
	g, err := m.OpenRW(seg)
	if err != nil {
		t.Fatal(err)
	}
	g.WriteAt([]byte{0xff, 0xee}, 60)
	g.Close()
	out.Reset()
	if _, err := Run(m, Options{Data: "/data", Partition: -1}, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "wal: segment "+seg+" does not decode at byte 0, but 3 entries after it do") || strings.Contains(s, "a/0: the write-ahead log") {
		t.Fatalf("output after damaging the WAL's first entry:\n%s", s)
	}
}

// TestRunCorruptionTheWALHolds: a corrupt batch whose offsets the
// write-ahead log holds is reported as restorable by the next start.
func TestRunCorruptionTheWALHolds(t *testing.T) {
	m := vfs.NewMem()
	l, err := storage.Open(m, "/data/topics/a/0", storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(3, 10, 1), 0)
	second, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(3, 10, 2), 3)
	if err := l.Append(first, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(second, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, _ := m.Create("/data/topics/a/topic.json")
	f.Write([]byte(`{"id":"0102030405060708090a0b0c0d0e0f10","partitions":1}`))
	f.Close()
	writeWAL(t, m, walEntry{walPart, 0, 6, append(first, second...)})
	names, _ := m.ReadDir("/data/topics/a/0")
	var seg string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			seg = "/data/topics/a/0/" + n
		}
	}
	g, err := m.OpenRW(seg)
	if err != nil {
		t.Fatal(err)
	}
	g.WriteAt([]byte{0xff}, 70) // inside the records: the CRC fails
	g.Close()
	var out bytes.Buffer
	if _, err := Run(m, Options{Data: "/data", Partition: -1}, &out); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Run: %v, want ErrCorrupt; output:\n%s", err, out.String())
	}
	s := out.String()
	if !strings.Contains(s, "a/0: the write-ahead log holds offsets 0 to 5 (1 entries)") ||
		!strings.Contains(s, "a/0: it holds the corrupt offset 0: after a cut there, the next start restores") {
		t.Fatalf("output:\n%s", s)
	}
}

// walPart is the WAL key of partition 0 of the tests' topic "a" (the ID
// its topic.json gives).
var walPart = wal.Key{Topic: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}

// walEntry is one entry writeWAL appends: batches of k, offsets first up
// to end.
type walEntry struct {
	k          wal.Key
	first, end int64
	data       []byte
}

// writeWAL writes entries to the WAL in /data/wal, each synced, and
// closes it without retiring it (as a crash leaves it).
func writeWAL(t *testing.T, m vfs.FS, entries ...walEntry) {
	t.Helper()
	w, _, err := wal.Open(wal.Options{FS: m, Dir: "/data/wal", SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p, err := w.Append(e.k, e.first, e.end, e.data)
		if err == nil {
			err = w.Sync(p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
