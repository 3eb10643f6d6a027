package broker

import (
	"context"
	"sync"
)

// byteBudget bounds the bytes of requests held at once across every
// connection (QueuedMaxRequestBytes). A read loop takes a request's size
// before reading its body and waits, reading nothing more from its
// socket, while the budget is spent; the bytes come back when the
// request is done with. Waiters are served in order, so a large request
// is not starved by small ones.
type byteBudget struct {
	limit int64

	mu      sync.Mutex // guards the fields below
	used    int64
	waiters []*budgetWaiter // in arrival order
	waits   int64           // acquisitions that had to wait
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are granted
}

func newByteBudget(limit int64) *byteBudget { return &byteBudget{limit: limit} }

// acquire takes n bytes (n at most the limit), waiting until they are
// free or ctx is done; it reports whether it had to wait.
func (b *byteBudget) acquire(ctx context.Context, n int64) (waited bool, err error) {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.limit {
		b.used += n
		b.mu.Unlock()
		return false, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.waits++
	b.mu.Unlock()
	select {
	case <-w.ready:
		return true, nil
	case <-ctx.Done():
		b.mu.Lock()
		for i, x := range b.waiters {
			if x == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				b.grantLocked() // a large waiter gone may unblock smaller ones behind it
				b.mu.Unlock()
				return true, ctx.Err()
			}
		}
		b.mu.Unlock()
		b.release(n) // granted meanwhile
		return true, ctx.Err()
	}
}

// release returns n bytes and wakes the waiters they satisfy.
func (b *byteBudget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.grantLocked()
	b.mu.Unlock()
}

func (b *byteBudget) grantLocked() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.limit {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}

func (b *byteBudget) stats() (used, limit, waits int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.limit, b.waits
}
