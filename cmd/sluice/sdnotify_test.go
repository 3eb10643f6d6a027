package main

import (
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestServeNotifiesSystemd runs `sluice serve` with NOTIFY_SOCKET set,
// as systemd does for a Type=notify unit, and checks that READY=1
// arrives once the broker accepts connections, and STOPPING=1 on
// SIGTERM.
func TestServeNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	pc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	addr := freeAddr(t)
	cmd := sluiceCmd("serve")
	cmd.Env = append(cmd.Env, "SLUICE_DATA="+t.TempDir(), "SLUICE_LISTEN="+addr, "SLUICE_HTTP="+freeAddr(t), "SLUICE_SCHEMA_REGISTRY=", "NOTIFY_SOCKET="+sock)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	read := func() string {
		t.Helper()
		buf := make([]byte, 4096)
		pc.SetReadDeadline(time.Now().Add(time.Minute))
		n, err := pc.Read(buf)
		if err != nil {
			t.Fatalf("no notification from sluice serve: %v\n%s", err, stderr.String())
		}
		return string(buf[:n])
	}
	if got := read(); got != "READY=1\nSTATUS=serving" {
		t.Fatalf("first notification %q, want READY=1", got)
	}
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("READY=1 sent before the broker accepts connections: %v", err)
	}
	c.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "STOPPING=1" {
		t.Fatalf("notification on SIGTERM %q, want STOPPING=1", got)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v:\n%s", err, stderr.String())
	}
}

// TestSDNotifyRejectsRelativeSocket checks the message for a
// NOTIFY_SOCKET that is neither a path nor an abstract name.
func TestSDNotifyRejectsRelativeSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "notify")
	if err := sdNotify("READY=1"); err == nil {
		t.Fatal("sdNotify accepted a relative NOTIFY_SOCKET")
	}
	t.Setenv("NOTIFY_SOCKET", "")
	if err := sdNotify("READY=1"); err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v", err)
	}
}
