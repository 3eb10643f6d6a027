package storage

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
)

const dir = "/data/p0"

// fileBytes reads a whole file from fs.
func fileBytes(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	b, err := vfs.ReadFile(fs, name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return b
}

// overwrite replaces a file's contents (and syncs it, so a crash keeps it).
func overwrite(t *testing.T, fs vfs.FS, name string, b []byte) {
	t.Helper()
	if _, err := writeFile(fs, name, b); err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir(filepath.Dir(name)); err != nil {
		t.Fatal(err)
	}
}

func segPath(base int64) string { return filepath.Join(dir, segmentName(base)+logSuffix) }

// buildLog writes n batches to a fresh log on a MemFS and closes it
// cleanly (or leaves it open when crash is true, after a Sync, and returns
// the crash image instead).
func buildLog(t *testing.T, cfg Config, n int, crash bool) (*vfs.MemFS, *appender) {
	t.Helper()
	m := vfs.NewMem()
	l := mustOpen(t, m, dir, cfg)
	a := newAppender(t, l)
	for i := 0; i < n; i++ {
		a.add(1+i%4, 50+(i*37)%200, int64(10_000+i))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if crash {
		c := m.CrashClone(vfs.CrashOptions{})
		l.Close()
		return c, a
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return m, a
}

func TestRecoveryCleanRestartDoesNotRescan(t *testing.T) {
	m, a := buildLog(t, Config{SegmentBytes: 4 << 10, IndexInterval: 256}, 80, false)
	l := mustOpen(t, m, dir, Config{SegmentBytes: 4 << 10, IndexInterval: 256})
	defer l.Close()
	r := l.Recovery()
	if !r.Clean || r.SegmentsScanned != 0 || r.BytesScanned != 0 || r.IndexesRebuilt != 0 || r.Segments < 3 {
		t.Fatalf("clean restart report %+v", r)
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatal("contents differ after a clean restart")
	}
	if err := SyncCheckpoints(m, []*Log{l}); err != nil {
		t.Fatal(err)
	}
	if b, err := vfs.ReadFile(m.CrashClone(vfs.CrashOptions{}), filepath.Join(dir, checkpointName)); err == nil {
		if _, err := decodeCheckpoint(b); err == nil {
			t.Fatal("checkpoint still valid after Open: a crash now would be taken for a clean shutdown")
		}
	}
}

// TestCleanRestartZeroingUnsynced: Open zeroes the clean-shutdown
// checkpoint without syncing it (SyncCheckpoints or the log's first Sync
// does). A crash before then, whatever of the appends since reached the
// disk, recovers exactly the batches that did: the checkpoint that came
// back is trusted only while the segment has the size it names. The
// log's first Sync makes the zeroing durable, and a Sync with nothing
// written since the clean restart writes nothing.
func TestCleanRestartZeroingUnsynced(t *testing.T) {
	cfg := Config{SegmentBytes: 64 << 10, IndexInterval: 256}
	m, a := buildLog(t, cfg, 20, false)
	l := mustOpen(t, m, dir, cfg)
	defer l.Close()
	before := m.Ops(vfs.OpSync)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := m.Ops(vfs.OpSync) - before; n != 0 {
		t.Fatalf("a Sync with nothing written since a clean restart made %d syncs", n)
	}
	clean := len(a.data)
	a2 := newAppender(t, l)
	a2.data = append([]byte(nil), a.data...)
	for i := range 6 {
		a2.add(3, 120, int64(20_000+i))
	}
	for seed := range int64(40) {
		c := m.CrashClone(vfs.CrashOptions{Tear: seed > 0, Rand: rand.New(rand.NewPCG(uint64(seed), 1))})
		rl := mustOpen(t, c, dir, cfg)
		got := readAll(t, rl, 0)
		r := rl.Recovery()
		rl.Close()
		if len(got) < clean || !bytes.Equal(got, a2.data[:len(got)]) {
			t.Fatalf("seed %d: recovered %d bytes, not the %d of the clean close plus a prefix of the appends", seed, len(got), clean)
		}
		if r.Clean && len(got) != clean {
			t.Fatalf("seed %d: taken for a clean restart with %d bytes past the checkpoint", seed, len(got)-clean)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	c := m.CrashClone(vfs.CrashOptions{})
	if b, err := vfs.ReadFile(c, filepath.Join(dir, checkpointName)); err == nil {
		if _, err := decodeCheckpoint(b); err == nil {
			t.Fatal("checkpoint still valid after the first Sync")
		}
	}
	rl := mustOpen(t, c, dir, cfg)
	defer rl.Close()
	if got := readAll(t, rl, 0); !bytes.Equal(got, a2.data) {
		t.Fatal("synced appends lost")
	}
}

func TestRecoveryCrashRestartScansActive(t *testing.T) {
	m, a := buildLog(t, Config{SegmentBytes: 4 << 10, IndexInterval: 256}, 80, true)
	l := mustOpen(t, m, dir, Config{SegmentBytes: 4 << 10, IndexInterval: 256})
	defer l.Close()
	r := l.Recovery()
	if r.Clean || r.SegmentsScanned != 1 || r.BytesScanned == 0 || r.TruncatedBytes != 0 {
		t.Fatalf("crash restart report %+v: want exactly the active segment scanned", r)
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatal("synced data differs after a crash restart")
	}
}

func TestRecoveryTornTail(t *testing.T) {
	cases := []struct {
		name string
		tail func(last []byte) []byte // bytes added after the last whole batch
	}{
		{"half a header", func(last []byte) []byte { return last[:30] }},
		{"header without body", func(last []byte) []byte { return last[:batch.HeaderSize+5] }},
		{"all but one byte", func(last []byte) []byte { return last[:len(last)-1] }},
		{"zeros (preallocated)", func(last []byte) []byte { return make([]byte, 700) }},
		{"part of a batch over zeros", func(last []byte) []byte {
			return append(append([]byte(nil), last[:batch.HeaderSize+9]...), make([]byte, 700)...)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, a := buildLog(t, Config{}, 20, true)
			name := segPath(0)
			seg := fileBytes(t, m, name)
			last := seg[len(seg)-a.sizes[len(a.sizes)-1]:]
			torn := c.tail(last)
			overwrite(t, m, name, append(seg, torn...))

			l := mustOpen(t, m, dir, Config{})
			defer l.Close()
			r := l.Recovery()
			cut := r.TruncatedBytes
			if bytes.Count(torn, []byte{0}) == len(torn) {
				cut = r.PreallocatedBytes // zeros written ahead: nothing torn
				if r.TruncatedBytes != 0 {
					t.Fatalf("zeros after the data reported as a torn tail (%+v)", r)
				}
			}
			if cut != int64(len(torn)) {
				t.Fatalf("cut %d bytes, want %d (%+v)", cut, len(torn), r)
			}
			if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
				t.Fatal("contents differ after truncating a torn tail")
			}
			if got := fileBytes(t, m, name); !bytes.Equal(got, seg) {
				t.Fatalf("segment is %d bytes after truncation, want %d", len(got), len(seg))
			}
			// The log keeps working: the next append lands right after.
			a.l = l
			a.add(2, 10, 99)
			if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
				t.Fatal("append after truncation misplaced")
			}
		})
	}
}

func TestRecoveryCorruptionReported(t *testing.T) {
	cases := []struct {
		name   string
		active bool // corrupt the active (last) segment, else a sealed one
		mutate func(b []byte, at int)
	}{
		{"flipped payload byte in active", true, func(b []byte, at int) { b[at+batch.HeaderSize+3] ^= 0xff }},
		{"bad magic in active", true, func(b []byte, at int) { b[at+16] = 7 }},
		{"bad length in active", true, func(b []byte, at int) { b[at+8] = 0x7f }},
		{"flipped payload byte in sealed", false, func(b []byte, at int) { b[at+batch.HeaderSize] ^= 1 }},
		{"wrong base offset in sealed", false, func(b []byte, at int) { b[at+7]++ }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The active case has one segment; the sealed case several,
			// with the first one's index lost (as after a crash in the middle
			// of a roll), since a sealed segment with an intact index is
			// trusted without being read.
			cfg := Config{SegmentBytes: 4 << 10}
			if c.active {
				cfg = Config{}
			}
			m, a := buildLog(t, cfg, 60, true)
			names, _ := m.ReadDir(dir)
			var segs []string
			for _, n := range names {
				if _, ok := parseSegmentName(n); ok {
					segs = append(segs, filepath.Join(dir, n))
				}
			}
			target := segs[len(segs)-1]
			if !c.active {
				if len(segs) < 3 {
					t.Fatalf("want several segments, have %v", segs)
				}
				target = segs[0]
				m.Remove(strings.TrimSuffix(target, logSuffix) + indexSuffix)
				m.SyncDir(dir)
			}
			b := fileBytes(t, m, target)
			// Corrupt the second batch of the segment.
			h, err := batch.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			at := h.Size()
			if at >= len(b)-100 {
				t.Fatalf("segment %s too short to corrupt a middle batch", target)
			}
			orig := append([]byte(nil), b...)
			c.mutate(b, at)
			overwrite(t, m, target, b)

			_, err = Open(m, dir, cfg)
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("Open = %v, want a *CorruptionError", err)
			}
			wantPos, wantOff := int64(at), h.LastOffset()+1
			if c.name == "wrong base offset in sealed" {
				// Sealed segments may have gaps (compaction), so a base
				// offset moved up is caught where the next batch overlaps it.
				h2, err := batch.ParseHeader(orig[at:])
				if err != nil {
					t.Fatal(err)
				}
				wantPos, wantOff = int64(at+h2.Size()), h2.LastOffset()+2
			}
			if ce.Segment != target || ce.Position != wantPos || ce.Offset != wantOff {
				t.Fatalf("error names %s byte %d offset %d; want %s byte %d offset %d (%v)",
					ce.Segment, ce.Position, ce.Offset, target, wantPos, wantOff, ce)
			}
			if ce.Broken != target+brokenSuffix || !bytes.Equal(fileBytes(t, m, ce.Broken), b) {
				t.Fatalf("no faithful copy at %q", ce.Broken)
			}
			if !bytes.Equal(fileBytes(t, m, target), b) {
				t.Fatal("the corrupt segment was modified")
			}
			// Repairing the bytes makes the log open again with everything.
			overwrite(t, m, target, orig)
			l := mustOpen(t, m, dir, cfg)
			defer l.Close()
			if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
				t.Fatal("contents differ after repair")
			}
		})
	}
}

func TestRecoveryRebuildsIndexes(t *testing.T) {
	cfg := Config{SegmentBytes: 4 << 10, IndexInterval: 200}
	cases := []struct {
		name   string
		break_ func(t *testing.T, m *vfs.MemFS, idx string)
	}{
		{"missing offset index", func(t *testing.T, m *vfs.MemFS, idx string) { m.Remove(idx + indexSuffix) }},
		{"missing time index", func(t *testing.T, m *vfs.MemFS, idx string) { m.Remove(idx + timeIndexSuffix) }},
		{"flipped byte", func(t *testing.T, m *vfs.MemFS, idx string) {
			b := fileBytes(t, m, idx+indexSuffix)
			b[indexHeaderSize+1] ^= 0x10
			overwrite(t, m, idx+indexSuffix, b)
		}},
		{"truncated", func(t *testing.T, m *vfs.MemFS, idx string) {
			b := fileBytes(t, m, idx+timeIndexSuffix)
			overwrite(t, m, idx+timeIndexSuffix, b[:len(b)-3])
		}},
		{"empty", func(t *testing.T, m *vfs.MemFS, idx string) { overwrite(t, m, idx+indexSuffix, nil) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, a := buildLog(t, cfg, 80, false)
			stem := filepath.Join(dir, segmentName(0))
			want := fileBytes(t, m, stem+indexSuffix)
			wantT := fileBytes(t, m, stem+timeIndexSuffix)
			c.break_(t, m, stem)
			m.SyncDir(dir)

			l := mustOpen(t, m, dir, cfg)
			r := l.Recovery()
			if r.IndexesRebuilt != 1 || r.SegmentsScanned != 1 || !r.Clean {
				t.Fatalf("report %+v: want one rebuilt index", r)
			}
			if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
				t.Fatal("contents differ with a rebuilt index")
			}
			l.Close()
			// The rebuilt files are exactly what was written at roll.
			if !bytes.Equal(fileBytes(t, m, stem+indexSuffix), want) || !bytes.Equal(fileBytes(t, m, stem+timeIndexSuffix), wantT) {
				t.Fatal("rebuilt index files differ from the originals")
			}
			l = mustOpen(t, m, dir, cfg)
			if r := l.Recovery(); r.IndexesRebuilt != 0 || r.BytesScanned != 0 {
				t.Fatalf("index rebuilt again on the next open: %+v", r)
			}
			l.Close()
		})
	}
}

func TestRecoveryRemovesLeftovers(t *testing.T) {
	m, a := buildLog(t, Config{}, 5, false)
	for _, n := range []string{"00000000000000099999.index", "00000000000000099999.timeindex", checkpointName + tmpSuffix} {
		overwrite(t, m, filepath.Join(dir, n), []byte("junk"))
	}
	l := mustOpen(t, m, dir, Config{})
	defer l.Close()
	if r := l.Recovery(); r.FilesRemoved != 3 {
		t.Fatalf("report %+v, want 3 leftovers removed", r)
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatal("contents differ")
	}
}

func TestOpenEmptyAndBadConfig(t *testing.T) {
	m := vfs.NewMem()
	if _, err := Open(m, dir, Config{SegmentBytes: -1}); err == nil {
		t.Fatal("negative SegmentBytes accepted")
	}
	if _, err := Open(m, dir, Config{IndexInterval: -1}); err == nil {
		t.Fatal("negative IndexInterval accepted")
	}
	l := mustOpen(t, m, dir, Config{})
	defer l.Close()
	if l.NextOffset() != 0 || l.StartOffset() != 0 {
		t.Fatalf("empty log offsets %d %d", l.StartOffset(), l.NextOffset())
	}
	if ts, off := l.MaxTimestamp(); ts != -1 || off != -1 {
		t.Fatalf("MaxTimestamp of an empty log = %d %d", ts, off)
	}
	s, err := l.Read(0, 0, 100)
	if err != nil || s.Len() != 0 {
		t.Fatalf("Read of an empty log = %d bytes, %v", s.Len(), err)
	}
	if n, err := s.WriteTo(io.Discard); n != 0 || err != nil {
		t.Fatalf("empty WriteTo = %d %v", n, err)
	}
}
