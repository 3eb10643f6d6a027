package bench

import (
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"time"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// for a broker process started next to be told to listen on it.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// WaitListening polls addr until a TCP connection succeeds, or fails
// once limit has passed.
func WaitListening(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("broker not listening on %s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StopProcess stops a started broker process: SIGTERM, then SIGKILL if
// it has not exited after grace. It returns once the process has exited
// and been waited for.
func StopProcess(cmd *exec.Cmd, grace time.Duration) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		cmd.Process.Kill()
		<-done
	}
}
