package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// FloorConfig describes a floor run: timed small overwrites of a
// pre-zeroed file, each followed by fdatasync, in a directory on the disk
// to measure (a broker's data directory).
type FloorConfig struct {
	Dir      string        // where the scratch file is created (and removed)
	Ops      int           // writes to time; 0 means until Duration
	Duration time.Duration // run length when Ops is 0
	Size     int           // bytes per write
	// FileBytes is the size of the scratch file, zeroed and synced before
	// the timed writes; they cycle through it. 0: 64 MiB, or less when
	// Ops × Size is less.
	FileBytes int64
	// Peer, when above 0, makes each write wait for a reply from a peer
	// that takes this long to answer (it keeps its own processor busy
	// meanwhile), as a broker's acknowledgement waits for the client's
	// next request: the writer's processor is idle between writes. On a
	// virtual machine that idle is not free (the next write's fdatasync
	// ends on a processor the host had descheduled), so this is the floor
	// of one producer's synchronous requests. The wait is not timed.
	Peer time.Duration
}

// defaultFloorFile is the default FileBytes: large enough that the writes
// of a short run never reuse a block, small enough to zero in a moment.
const defaultFloorFile = 64 << 20

func (c *FloorConfig) validate() error {
	switch {
	case c.Dir == "":
		return errors.New("a directory is required")
	case c.Ops < 0:
		return fmt.Errorf("ops %d must not be negative", c.Ops)
	case c.Ops == 0 && c.Duration <= 0:
		return errors.New("give an op count or a duration")
	case c.Size < 1:
		return fmt.Errorf("write size %d must be at least 1", c.Size)
	case c.FileBytes < 0:
		return fmt.Errorf("file size %d must not be negative", c.FileBytes)
	case c.Peer < 0:
		return fmt.Errorf("peer time %v must not be negative", c.Peer)
	}
	st, err := os.Stat(c.Dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", c.Dir)
	}
	return nil
}

// FloorResult is the outcome of a floor run: what one durable write costs
// on that disk with nothing else in the way, the least a durable
// acknowledgement can take there.
type FloorResult struct {
	Dir     string        `json:"dir"`
	Ops     int64         `json:"ops"`
	Size    int           `json:"size"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Latency Latencies     `json:"latency_ns"` // one pwrite + fdatasync
	// Peer is FloorConfig.Peer: how long each write waited for a peer
	// before it (0: back to back). Elapsed and CPU include the waits.
	Peer time.Duration `json:"peer_ns,omitempty"`
	// CPU is this process's user and system time over the timed writes
	// (without the peer's, with Peer):
	// what the kernel charges a writer for its durable writes, the least
	// a durable broker pays per group commit beside an in-memory one (0
	// where the platform does not report it).
	CPU time.Duration `json:"cpu_ns"`
	// Files is the files floor (FilesFloor), when it was measured too.
	Files *FilesFloorResult `json:"files,omitempty"`
	// Memory is the memory floor (MemoryFloor), when it was measured too.
	Memory *MemoryFloorResult `json:"memory,omitempty"`
	// Segments is the segments floor (SegmentsFloor), when it was
	// measured too.
	Segments *SegmentsFloorResult `json:"segments,omitempty"`
}

// OpsPerSec is the number of durable writes per second, one at a time.
func (r FloorResult) OpsPerSec() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// CPUPerOp is the CPU time of one write and its fdatasync (0 when no
// write was timed).
func (r FloorResult) CPUPerOp() time.Duration {
	if r.Ops == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Ops)
}

// Floor measures the disk under cfg.Dir: it creates a scratch file there,
// writes zeros over all of it and syncs them (so that the timed writes
// allocate nothing and fdatasync flushes data only, as the broker's
// preallocated segments do), then times, one at a time, a write of
// cfg.Size bytes at the next offset followed by fdatasync (after a
// round trip to a peer taking cfg.Peer, when set). The file is removed at
// the end. ctx ends the run early; the writes done so far are reported.
func Floor(ctx context.Context, cfg FloorConfig) (FloorResult, error) {
	if err := cfg.validate(); err != nil {
		return FloorResult{}, err
	}
	size := cfg.FileBytes
	if size == 0 {
		size = defaultFloorFile
		if cfg.Ops > 0 {
			size = min(size, int64(cfg.Ops)*int64(cfg.Size))
		}
	}
	size = max(size, int64(cfg.Size))
	size -= size % int64(cfg.Size) // whole writes only
	f, err := os.CreateTemp(cfg.Dir, ".sluice-bench-floor-*")
	if err != nil {
		return FloorResult{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := zeroFile(f, size); err != nil {
		return FloorResult{}, fmt.Errorf("zero %s: %w", f.Name(), err)
	}

	buf := make([]byte, cfg.Size)
	for i := range buf {
		buf[i] = byte(i*7 + 1) // not zeros: the disk must write them
	}
	var p *peer
	var wait func() error
	if cfg.Peer > 0 {
		if p, err = startPeer(cfg.Peer); err != nil {
			return FloorResult{}, err
		}
		defer p.stop()
		wait = p.roundTrip
	}
	var h Histogram
	var off int64
	cpu0, err := processCPU()
	if err != nil {
		return FloorResult{}, err
	}
	start := time.Now()
	var deadline time.Time
	if cfg.Ops == 0 {
		deadline = start.Add(cfg.Duration)
	}
	for n := 0; cfg.Ops == 0 || n < cfg.Ops; n++ {
		if ctx.Err() != nil || (cfg.Ops == 0 && !time.Now().Before(deadline)) {
			break
		}
		if wait != nil {
			if err := wait(); err != nil {
				return FloorResult{}, err
			}
		}
		t0 := time.Now()
		if _, err := f.WriteAt(buf, off); err != nil {
			return FloorResult{}, err
		}
		if err := fdatasync(f); err != nil {
			return FloorResult{}, fmt.Errorf("fdatasync %s: %w", f.Name(), err)
		}
		h.Record(time.Since(t0))
		if off += int64(cfg.Size); off+int64(cfg.Size) > size {
			off = 0
		}
	}
	elapsed := time.Since(start)
	var peerCPU time.Duration
	if p != nil {
		peerCPU = p.stop() // its spinning is the client's, not the writer's
	}
	cpu1, err := processCPU()
	if err != nil {
		return FloorResult{}, err
	}
	return FloorResult{
		Dir:     cfg.Dir,
		Ops:     int64(h.Count()),
		Size:    cfg.Size,
		Elapsed: elapsed,
		Latency: h.Summary(),
		CPU:     max(0, cpu1-cpu0-peerCPU),
		Peer:    cfg.Peer,
	}, nil
}

// peer answers each byte the writer sends after spinning for its time,
// on a thread of its own, as a client busy preparing its next request.
type peer struct {
	toPeer, fromPeer *os.File // the writer's ends
	done             chan struct{}
	cpu              time.Duration // the peer thread's CPU time, once done is closed
}

func startPeer(d time.Duration) (*peer, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	p := &peer{toPeer: inW, fromPeer: outR, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer inR.Close()
		defer outW.Close()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cpu0 := threadCPU()
		defer func() { p.cpu = threadCPU() - cpu0 }()
		b := make([]byte, 1)
		for {
			if _, err := inR.Read(b); err != nil {
				return // the writer closed its end
			}
			for t := time.Now(); time.Since(t) < d; {
			}
			if _, err := outW.Write(b); err != nil {
				return
			}
		}
	}()
	return p, nil
}

// roundTrip sends the peer a byte and waits for its answer.
func (p *peer) roundTrip() error {
	b := []byte{1}
	if _, err := p.toPeer.Write(b); err != nil {
		return fmt.Errorf("floor peer: %w", err)
	}
	if _, err := p.fromPeer.Read(b); err != nil {
		return fmt.Errorf("floor peer: %w", err)
	}
	return nil
}

// stop ends the peer (again: a no-op) and returns its thread's CPU time.
func (p *peer) stop() time.Duration {
	if p.toPeer != nil {
		p.toPeer.Close()
		<-p.done
		p.fromPeer.Close()
		p.toPeer = nil
	}
	return p.cpu
}

// zeroFile writes size bytes of zeros to f from offset 0 and syncs them.
func zeroFile(f *os.File, size int64) error {
	zero := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zero)) {
		if _, err := f.WriteAt(zero[:min(int64(len(zero)), size-off)], off); err != nil {
			return err
		}
	}
	return f.Sync() // size and blocks, once
}

// WriteFloor prints a floor result in the style of WriteSummary.
func WriteFloor(w io.Writer, r FloorResult) {
	l := r.Latency
	peer := ""
	if r.Peer > 0 {
		peer = fmt.Sprintf(", each after a %s round trip to a busy peer", fmtDur(r.Peer))
	}
	fmt.Fprintf(w, "floor: %d writes of %d B + fdatasync in %s%s in %.2fs: %.0f ops/s\n",
		r.Ops, r.Size, r.Dir, peer, r.Elapsed.Seconds(), r.OpsPerSec())
	fmt.Fprintf(w, "latency: p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
		fmtDur(l.P50), fmtDur(l.P90), fmtDur(l.P99), fmtDur(l.P999), fmtDur(l.Max))
	if r.CPU > 0 {
		fmt.Fprintf(w, "cpu: %s per write + fdatasync (user and system time of this process)\n", fmtDur(r.CPUPerOp()))
	}
}
