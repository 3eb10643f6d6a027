package acceptor

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// waitHealth waits for the partition's next failure or heal and returns
// Err afterwards.
func waitHealth(t *testing.T, a *Acceptor, ch <-chan struct{}) error {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("the partition's health never changed")
	}
	return a.Err()
}

// TestHeal: a partition failed by an fsync heals once the log recovers:
// the unsynced append is cut, Recovered runs before any new append, the
// high watermark never showed the unsynced records, and appends continue
// from the durable end. While the fault lasts, recovery is retried.
func TestHeal(t *testing.T) {
	recovered := make(chan struct{}, 10)
	fx := newFixture(t, func(c *Config) {
		c.HealBackoff, c.HealBackoffMax = time.Millisecond, 2*time.Millisecond
		c.Recovered = func() error { recovered <- struct{}{}; return nil }
	})
	bg := context.Background()
	r0, o0 := mkReq(3, 10, 0, true)
	c0 := goAppend(bg, fx.a, r0, o0).wait(t)
	if c0.err != nil {
		t.Fatal(c0.err)
	}
	cause := fmt.Errorf("fsync: %w", syscall.EIO)
	health := fx.a.HealthChanged()
	fx.f.set(func(f *fakeLog) { f.syncErr = cause })
	r1, _ := mkReq(2, 10, 1, true)
	if _, err := fx.a.Append(bg, r1); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append under EIO: %v, want ErrFailed wrapping EIO", err)
	}
	if err := waitHealth(t, fx.a, health); err == nil {
		t.Fatal("Err is nil after a failed fsync")
	}
	if hw := fx.a.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d, want 3 (the unsynced append is invisible)", hw)
	}
	health = fx.a.HealthChanged()
	if len(recovered) != 0 {
		t.Fatal("Recovered ran while the log could not recover")
	}
	fx.f.set(func(f *fakeLog) { f.syncErr = nil })
	if err := waitHealth(t, fx.a, health); err != nil {
		t.Fatalf("after the fault cleared: %v", err)
	}
	select {
	case <-recovered:
	default:
		t.Fatal("the partition healed without running Recovered")
	}
	r2, o2 := mkReq(1, 10, 2, true)
	c2 := goAppend(bg, fx.a, r2, o2).wait(t)
	if c2.err != nil || c2.res.BaseOffset != 3 {
		t.Fatalf("append after healing: offset %d, %v; want offset 3", c2.res.BaseOffset, c2.err)
	}
	if hw := fx.a.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d, want 4", hw)
	}
	_, data, _ := fx.f.snapshot()
	checkData(t, data, c0, c2)
}

// TestHealRecoveredFails: a Recovered error keeps the partition failed
// and recovery is retried until it succeeds.
func TestHealRecoveredFails(t *testing.T) {
	tries := 0
	fx := newFixture(t, func(c *Config) {
		c.HealBackoff, c.HealBackoffMax = time.Millisecond, time.Millisecond
		c.Recovered = func() error {
			if tries++; tries < 3 {
				return errors.New("not yet")
			}
			return nil
		}
	})
	health := fx.a.HealthChanged()
	fx.f.set(func(f *fakeLog) { f.appendErr = fmt.Errorf("write: %w", syscall.ENOSPC) })
	r, _ := mkReq(1, 10, 0, true)
	if _, err := fx.a.Append(context.Background(), r); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append: %v, want ENOSPC", err)
	}
	waitHealth(t, fx.a, health)
	health = fx.a.HealthChanged()
	fx.f.set(func(f *fakeLog) { f.appendErr = nil })
	if err := waitHealth(t, fx.a, health); err != nil {
		t.Fatal(err)
	}
	if tries != 3 {
		t.Fatalf("Recovered ran %d times, want 3", tries)
	}
}
