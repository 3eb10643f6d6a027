package broker

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/vfs"
)

// The disk guard.
//
// A monitor goroutine reads the data directory's free space with statfs
// every DiskCheckInterval (never per append). Below the low watermark
// (DiskLowWatermark; by default 1 GiB or 5% of the filesystem, whichever
// is smaller) every produce is refused before it reaches a partition,
// per partition, with KAFKA_STORAGE_ERROR and a message saying the disk
// is full, so no write is torn by ENOSPC and no partition fails.
// Retention, topic deletion, offset commits and fetches go on, so space
// can be freed; once free space is back above the watermark, produce
// works again. Crossing the watermark either way is logged once.
//
// KAFKA_STORAGE_ERROR rather than POLICY_VIOLATION: every mainstream
// client treats KAFKA_STORAGE_ERROR as retriable (franz-go's kerr marks
// it Retriable; librdkafka refreshes metadata and retries the batch; the
// Java client's KafkaStorageException is a RetriableException), so
// producers keep their records and deliver them once space is freed,
// within their delivery timeout, and idempotent sequences stay intact.
// POLICY_VIOLATION is not retriable in any of them: records would be
// failed at once and dropped by the client.

// diskState is what the monitor last saw.
type diskState struct {
	free, total uint64
	watermark   uint64 // refuse produce while free < watermark
	low         bool
}

// watermarkFor is the effective low watermark for a filesystem of total
// bytes: the configured one, or by default min(1 GiB, 5% of total).
func (c *cfg) watermarkFor(total uint64) uint64 {
	switch {
	case c.diskWatermark == 0:
		return 0
	case c.diskWatermark > 0:
		return uint64(c.diskWatermark)
	}
	return min(uint64(1<<30), total/20)
}

// checkDisk reads the free space and updates the guard, logging a
// crossing of the watermark. It is called by New and the monitor
// goroutine only.
func (b *Broker) checkDisk() {
	st, ok := b.fs.(vfs.Statter)
	if !ok {
		return
	}
	u, err := st.Usage(b.cfg.dataDir)
	if err != nil {
		b.cfg.logger.Warn("disk guard: cannot read free space", "data", b.cfg.dataDir, "err", err)
		return
	}
	wm := b.cfg.watermarkFor(u.Total)
	d := &diskState{free: u.Free, total: u.Total, watermark: wm, low: u.Free < wm}
	old := b.disk.Swap(d)
	b.metrics.diskFree.Set(float64(u.Free))
	switch {
	case d.low && (old == nil || !old.low):
		b.cfg.logger.Warn("disk guard: free space below the low watermark; produce is refused until space is freed",
			"data", b.cfg.dataDir, "free_bytes", u.Free, "watermark_bytes", wm)
	case !d.low && old != nil && old.low:
		b.cfg.logger.Info("disk guard: free space back above the low watermark; produce accepted again",
			"data", b.cfg.dataDir, "free_bytes", u.Free, "watermark_bytes", wm)
	}
	b.diskMu.Lock()
	close(b.diskCh)
	b.diskCh = make(chan struct{})
	b.diskMu.Unlock()
}

// diskChecked returns a channel closed after the next disk check.
func (b *Broker) diskChecked() <-chan struct{} {
	b.diskMu.Lock()
	defer b.diskMu.Unlock()
	return b.diskCh
}

// monitorDisk is the monitor goroutine: it checks the disk every
// DiskCheckInterval until Close cancels stopCtx, then closes
// monitorDone.
func (b *Broker) monitorDisk() {
	defer close(b.monitorDone)
	t := time.NewTicker(b.cfg.diskInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.checkDisk()
		case <-b.stopCtx.Done():
			return
		}
	}
}

// diskGuard refuses an append to p while free space is below the
// watermark.
func (b *Broker) diskGuard(p *partition.Partition) error {
	d := b.disk.Load()
	if d == nil || !d.low {
		return nil
	}
	return errCode(kerr.KafkaStorageError,
		"%s/%d: disk full: %d bytes free on the data directory's filesystem, below the low watermark of %d bytes; "+
			"produce is refused until space is freed (retention, deleting topics, or more disk)",
		p.Topic(), p.Index(), d.free, d.watermark)
}

// DiskFree reports the data directory filesystem's free bytes as last
// checked, and whether they are below the low watermark (produce is
// refused).
func (b *Broker) DiskFree() (free uint64, low bool) {
	d := b.disk.Load()
	if d == nil {
		return 0, false
	}
	return d.free, d.low
}

func newDiskFreeGauge() prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "sluice", Name: "disk_free_bytes",
		Help: "Free bytes on the data directory's filesystem (statfs, available to the broker), as last checked.",
	})
}

// String is for logs and test failures.
func (d *diskState) String() string {
	return fmt.Sprintf("free %d of %d bytes, watermark %d, low %v", d.free, d.total, d.watermark, d.low)
}
