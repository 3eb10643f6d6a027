package broker

import (
	"sync"
	"testing"
)

// TestStartCloseRace runs Start and Close at the same time, many times:
// whichever wins, Close must leave no listener, accept loop or group
// coordinator behind (goleak in TestMain checks the goroutines), and a
// Start that loses must say the broker is closed.
func TestStartCloseRace(t *testing.T) {
	for i := 0; i < 20; i++ {
		b, err := New(DataDir(t.TempDir()), ListenAddr("127.0.0.1:0"))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var startErr error
		wg.Add(2)
		go func() { defer wg.Done(); startErr = b.Start() }()
		go func() { defer wg.Done(); b.Close() }()
		wg.Wait()
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if startErr == nil && b.Addr() == "" {
			t.Fatal("Start succeeded but the broker has no address")
		}
	}
}
