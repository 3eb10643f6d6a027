package storage

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sluicedb/sluice/internal/vfs"
)

// TestCreateKeepsFirstBytesUntilPrepare checks a log made by Create with
// write-behind on: its appends stay in memory (readable, no directory
// made) and OnPending is called once, when they reach pendNotify; Prepare then
// makes the directory and segment holding them; a Sync and a reopen keep
// them.
func TestCreateKeepsFirstBytesUntilPrepare(t *testing.T) {
	fs := vfs.NewMem()
	if err := vfs.MkdirAllDurable(fs, "/t"); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	cfg := Config{WriteBehind: 4 << 10, OnPending: func() { calls.Add(1) }}
	l, err := Create(fs, "/t/0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Pending() {
		t.Fatal("a created log reports its file made before any write")
	}
	a := newAppender(t, l)
	for i := range 20 { // 20 × ~1.1 KiB: past the 4 KiB tail, within pendNotify
		a.add(1, 1000, int64(i))
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("OnPending called %d times for %d bytes, want 0 below %d", n, len(a.data), pendNotify)
	}
	for i := 20; len(a.data) < pendNotify+8<<10; i++ {
		a.add(1, 1000, int64(i))
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("OnPending called %d times for %d bytes, want 1", n, len(a.data))
	}
	if _, err := fs.Stat("/t/0"); err == nil {
		t.Fatal("the log's directory was made by an append; want it made by Prepare")
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatalf("read %d bytes before the file is made, want the %d appended", len(got), len(a.data))
	}
	if err := l.Prepare(); err != nil {
		t.Fatal(err)
	}
	if l.Pending() {
		t.Fatal("Pending after Prepare")
	}
	a.add(1, 1000, 99)
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatalf("read %d bytes after Prepare, want the %d appended", len(got), len(a.data))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashOptions{})
	for name, m := range map[string]vfs.FS{"clean": fs, "power cut after the sync": crashed} {
		r := mustOpen(t, m, "/t/0", Config{})
		if got := readAll(t, r, 0); !bytes.Equal(got, a.data) {
			t.Fatalf("%s: reopened log holds %d bytes, want %d", name, len(got), len(a.data))
		}
		r.Close()
	}
}

// TestCreateMakesFileWhenKeptBytesOverflow checks that a created log
// whose first bytes pass pendMax makes its file on the write, and that
// one without write-behind makes it on its first write (its bytes then
// reach the page cache as any file's).
func TestCreateMakesFileWhenKeptBytesOverflow(t *testing.T) {
	for _, tc := range []struct {
		name        string
		writeBehind int
		batches     int
	}{
		{"past pendMax", 4 << 10, pendMax/(60<<10) + 2},
		{"no write-behind", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			if err := vfs.MkdirAllDurable(fs, "/t"); err != nil {
				t.Fatal(err)
			}
			l, err := Create(fs, "/t/0", Config{WriteBehind: tc.writeBehind})
			if err != nil {
				t.Fatal(err)
			}
			a := newAppender(t, l)
			for i := range tc.batches {
				a.add(60, 1000, int64(i)) // ~60 KiB each: written through the tail
			}
			if l.Pending() {
				t.Fatalf("the file is not made after %d bytes", len(a.data))
			}
			if _, err := fs.Stat("/t/0/00000000000000000000.log"); err != nil {
				t.Fatalf("segment file: %v", err)
			}
			if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
				t.Fatalf("read %d bytes, want %d", len(got), len(a.data))
			}
			l.Close()
		})
	}
}

// TestCreateNeverWrittenMakesNoFiles checks that a created log closed
// without a write leaves no directory, and that Open makes it again,
// empty.
func TestCreateNeverWrittenMakesNoFiles(t *testing.T) {
	fs := vfs.NewMem()
	if err := vfs.MkdirAllDurable(fs, "/t"); err != nil {
		t.Fatal(err)
	}
	l, err := Create(fs, "/t/0", Config{WriteBehind: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat("/t/0"); err == nil {
		t.Fatal("a log never written made its directory at close")
	}
	r := mustOpen(t, fs, "/t/0", Config{})
	defer r.Close()
	if r.NextOffset() != 0 {
		t.Fatalf("next offset %d, want 0", r.NextOffset())
	}
}

// TestRecoverBeforeFileMade checks that a created log whose first bytes
// are still in memory (its file not made: the maker has not run, or
// failed) heals: Recover and RecoverUpTo must not need the directory to
// exist, else the partition stays failed for good (nothing else makes
// the file while the log is failed). After the heal the log holds what
// it keeps of its bytes, takes appends, and a synced log survives a
// power cut.
func TestRecoverBeforeFileMade(t *testing.T) {
	for _, tc := range []struct {
		name    string
		recover func(l *Log, next int64) error
		want    func(a *appender) []byte // the bytes the log holds after the heal
	}{
		// Nothing was fsynced: a heal cuts back to the log's own last sync.
		{"Recover", func(l *Log, _ int64) error { return l.Recover(false) }, func(*appender) []byte { return nil }},
		{"Recover keeping unsynced", func(l *Log, _ int64) error { return l.Recover(true) }, func(a *appender) []byte { return a.data }},
		// The whole batches below the write-behind tail (the last batch
		// ends in it; the caller refills it from its write-ahead log).
		{"RecoverUpTo after ENOSPC", func(l *Log, next int64) error { return l.RecoverUpTo(next) }, func(a *appender) []byte { return a.data[:len(a.data)-a.sizes[len(a.sizes)-1]] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			if err := vfs.MkdirAllDurable(fs, "/t"); err != nil {
				t.Fatal(err)
			}
			l, err := Create(fs, "/t/0", Config{WriteBehind: 4 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			a := newAppender(t, l)
			for i := range 8 { // past the 4 KiB tail: some bytes are in the lazy file's memory
				a.add(1, 1000, int64(i))
			}
			if !l.Pending() {
				t.Fatal("the file was made by the appends; want it kept in memory")
			}
			l.Abandon(syscall.ENOSPC)
			if err := tc.recover(l, a.next); err != nil {
				t.Fatalf("heal of a log whose file is not made yet: %v", err)
			}
			want := tc.want(a)
			if got := readAll(t, l, 0); !bytes.Equal(got, want) {
				t.Fatalf("after the heal the log holds %d bytes, want %d", len(got), len(want))
			}
			a.data = append([]byte(nil), want...)
			a.next = l.NextOffset()
			a.add(1, 1000, 50)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			crashed := fs.CrashClone(vfs.CrashOptions{})
			r := mustOpen(t, crashed, "/t/0", Config{})
			defer r.Close()
			if got := readAll(t, r, 0); !bytes.Equal(got, a.data) {
				t.Fatalf("after a power cut the healed log holds %d bytes, want %d", len(got), len(a.data))
			}
		})
	}
}

// TestDeleteRecordsBeforeFileMade checks DeleteRecordsBefore on a
// created log whose bytes are still in memory: it must not fail for the
// want of the log's directory, and the start offset survives a clean
// close and reopen.
func TestDeleteRecordsBeforeFileMade(t *testing.T) {
	fs := vfs.NewMem()
	if err := vfs.MkdirAllDurable(fs, "/t"); err != nil {
		t.Fatal(err)
	}
	l, err := Create(fs, "/t/0", Config{WriteBehind: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender(t, l)
	a.add(2, 100, 1)
	a.add(2, 100, 2)
	if !l.Pending() {
		t.Fatal("the file was made by the appends; want it kept in memory")
	}
	start, err := l.DeleteRecordsBefore(2)
	if err != nil {
		t.Fatalf("DeleteRecordsBefore on a log whose file is not made yet: %v", err)
	}
	if start != 2 || l.StartOffset() != 2 {
		t.Fatalf("start offset %d (log says %d), want 2", start, l.StartOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := mustOpen(t, fs, "/t/0", Config{})
	defer r.Close()
	if r.StartOffset() != 2 || r.NextOffset() != 4 {
		t.Fatalf("reopened: start %d next %d, want 2 and 4", r.StartOffset(), r.NextOffset())
	}
}

// TestPendingBudget: logs sharing a PendingBudget ask for their files
// (OnPending) once together they keep more than it, and past twice the
// budget a write makes its log's file instead of keeping the bytes; the
// bytes kept are released when the files are made or the log closed.
func TestPendingBudget(t *testing.T) {
	fs := vfs.NewMem()
	if err := vfs.MkdirAllDurable(fs, "/t"); err != nil {
		t.Fatal(err)
	}
	budget := NewPendingBudget(64 << 10)
	var calls [4]atomic.Int32
	logs := make([]*Log, 4)
	apps := make([]*appender, 4)
	for i := range logs {
		cfg := Config{WriteBehind: 4 << 10, Pending: budget, OnPending: func() { calls[i].Add(1) }}
		l, err := Create(fs, fmt.Sprintf("/t/%d", i), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		logs[i], apps[i] = l, newAppender(t, l)
	}
	// 20 KiB each into three logs: 60 KiB kept, within the budget.
	for i := range 3 {
		for j := 0; len(apps[i].data) < 20<<10; j++ {
			apps[i].add(1, 1000, int64(j))
		}
		if n := calls[i].Load(); n != 0 {
			t.Fatalf("log %d: OnPending called %d times within the budget", i, n)
		}
		if err := logs[i].Sync(); err != nil { // makes the log's file
			t.Fatal(err)
		}
	}
	if used := budget.Used(); used != 0 {
		t.Fatalf("%d bytes counted after every written log's file was made, want 0", used)
	}
	for i := range 3 {
		if logs[i].Pending() {
			t.Fatalf("log %d pending after Sync", i)
		}
		if n := calls[i].Load(); n != 0 {
			t.Fatalf("log %d: OnPending called %d times within the budget", i, n)
		}
	}
	// The fourth log alone: past the budget it asks for its file; past
	// twice the budget it makes the file itself on the write.
	l, a := logs[3], apps[3]
	for j := 0; len(a.data) < 64<<10+8<<10; j++ {
		a.add(1, 1000, int64(j))
	}
	if n := calls[3].Load(); n != 1 {
		t.Fatalf("OnPending called %d times past the budget (%d kept), want 1", n, budget.Used())
	}
	if !l.Pending() {
		t.Fatal("file made before twice the budget")
	}
	for j := 1000; len(a.data) < 128<<10+8<<10; j++ {
		a.add(1, 1000, int64(j))
	}
	if l.Pending() {
		t.Fatalf("still pending past twice the budget (%d kept)", budget.Used())
	}
	if used := budget.Used(); used != 0 {
		t.Fatalf("%d bytes counted after the file was made, want 0", used)
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatalf("read %d bytes, want the %d appended", len(got), len(a.data))
	}
}

// TestChunks: a new log's bytes held in pieces read back as written,
// across piece boundaries, after truncation and further writes.
func TestChunks(t *testing.T) {
	var c chunks
	var want []byte
	write := func(n int) {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(len(want) + i*7)
		}
		c.write(p)
		want = append(want, p...)
	}
	check := func() {
		t.Helper()
		if c.size != len(want) {
			t.Fatalf("size %d, want %d", c.size, len(want))
		}
		for _, off := range []int{0, 1, chunkSize - 1, chunkSize, len(want) / 2, len(want) - 1} {
			if off < 0 || off >= len(want) {
				continue
			}
			got := make([]byte, len(want)-off+10)
			n := c.readAt(got, int64(off))
			if !bytes.Equal(got[:n], want[off:]) {
				t.Fatalf("readAt(%d): %d bytes, want the %d from there", off, n, len(want)-off)
			}
		}
	}
	// A slice of a shared buffer, kept as it is: nothing written later
	// may land in the buffer.
	shared := func(n int) {
		buf := make([]byte, n, n+100)
		for i := range buf {
			buf[:n+100][i] = byte(len(want) + i*3)
		}
		c.writeShared(buf)
		want = append(want, buf...)
		t.Cleanup(func() {
			if !bytes.Equal(buf[n:n+100], make([]byte, 100)) {
				t.Error("a write landed in a shared buffer past its slice")
			}
		})
	}
	write(16 << 10)
	write(chunkSize) // across the first boundary
	shared(chunkSize + 7)
	write(3*chunkSize + 5)
	shared(100)
	check()
	copied := c.size - chunkSize - 7 - 100
	if c.copied != copied {
		t.Fatalf("copied %d, want %d", c.copied, copied)
	}
	for _, size := range []int{c.size - 50, 2*chunkSize + 3, 2 * chunkSize, chunkSize + 1, 0} {
		c.truncate(size)
		want = want[:size]
		check()
		write(chunkSize/2 + 1)
		check()
	}
	if c.copied != c.size {
		t.Fatalf("copied %d of %d bytes with no shared piece left", c.copied, c.size)
	}
}

// TestPendingBudgetOldestFirst: past the budget, the logs that started
// keeping bytes first are asked for their files, until what is left
// would be half the budget; the log being written is not asked while
// older ones cover it.
func TestPendingBudgetOldestFirst(t *testing.T) {
	fs := vfs.NewMem()
	if err := vfs.MkdirAllDurable(fs, "/t"); err != nil {
		t.Fatal(err)
	}
	budget := NewPendingBudget(96 << 10)
	var calls [3]atomic.Int32
	apps := make([]*appender, 3)
	for i := range apps {
		cfg := Config{WriteBehind: 4 << 10, Pending: budget, OnPending: func() { calls[i].Add(1) }}
		l, err := Create(fs, fmt.Sprintf("/t/%d", i), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		apps[i] = newAppender(t, l)
	}
	fill := func(i, upTo int) {
		for j := len(apps[i].sizes); len(apps[i].data) < upTo; j++ {
			apps[i].add(1, 1000, int64(j))
		}
	}
	fill(0, 40<<10) // the oldest
	fill(1, 40<<10)
	for i := range calls {
		if n := calls[i].Load(); n != 0 {
			t.Fatalf("log %d asked for its file within the budget (%d kept)", i, budget.Used())
		}
	}
	fill(2, 30<<10) // past 96 KiB: the two oldest cover the way back to half
	if calls[0].Load() != 1 || calls[1].Load() != 1 || calls[2].Load() != 0 {
		t.Fatalf("asked for their files: %d, %d, %d times; want the two oldest once each and not the newest",
			calls[0].Load(), calls[1].Load(), calls[2].Load())
	}
}

// TestPendingBudgetOrderBounded: the budget's order of logs keeping
// bytes drops those whose files were made, so that it does not grow with
// every log ever written (topics created and deleted over a broker's
// life).
func TestPendingBudgetOrderBounded(t *testing.T) {
	fs := vfs.NewMem()
	if err := vfs.MkdirAllDurable(fs, "/t"); err != nil {
		t.Fatal(err)
	}
	budget := NewPendingBudget(64 << 20)
	for i := range 1000 {
		l, err := Create(fs, fmt.Sprintf("/t/%d", i), Config{WriteBehind: 4 << 10, Pending: budget})
		if err != nil {
			t.Fatal(err)
		}
		a := newAppender(t, l)
		for j := 0; len(a.data) < 8<<10; j++ {
			a.add(1, 1000, int64(j))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	budget.mu.Lock()
	n := len(budget.order)
	budget.mu.Unlock()
	if n > 128 {
		t.Fatalf("the budget orders %d logs after 1000 were written and closed, want at most 128", n)
	}
	if used := budget.Used(); used != 0 {
		t.Fatalf("%d bytes counted after every log closed", used)
	}
}
