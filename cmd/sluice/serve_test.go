package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

// TestMain lets the test binary stand in for the sluice command: with
// SLUICE_TEST_MAIN=1 in its environment it runs main with its arguments.
func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	flag.Parse()
	goleak.VerifyTestMain(m)
}

// sluiceCmd returns a command running the test binary as sluice with args.
func sluiceCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SLUICE_TEST_MAIN=1")
	return cmd
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServe runs `sluice serve` configured only through environment
// variables, and waits until it accepts connections.
func startServe(t *testing.T, dir, addr string, extraEnv ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	return startServeArgs(t, addr, append([]string{"SLUICE_DATA=" + dir, "SLUICE_LISTEN=" + addr}, extraEnv...), "serve")
}

// startServeArgs runs sluice with args and env added, and waits until
// it accepts connections on addr. Its HTTP server is off unless env or
// args turn it on (the default port would collide between tests).
func startServeArgs(t *testing.T, addr string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := sluiceCmd(args...)
	cmd.Env = append(cmd.Env, "SLUICE_HTTP=", "SLUICE_SCHEMA_REGISTRY=")
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return cmd, &stderr
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("sluice serve never listened on %s:\n%s", addr, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stopServe(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sluice serve exited with %v after SIGTERM:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("sluice serve did not stop after SIGTERM:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopped cleanly") {
		t.Fatalf("no clean-stop message:\n%s", stderr.String())
	}
}

// TestServeGracefulShutdown produces with acks=all to `sluice serve`,
// stops it with SIGTERM, checks that the partition's clean-shutdown
// checkpoint was written, restarts it and reads every record back.
func TestServeGracefulShutdown(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	cmd, stderr := startServe(t, dir, addr)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("serve-test"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := 0; i < n; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("value-%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cl.Close()
	stopServe(t, cmd, stderr)

	checkpoints, _ := filepath.Glob(filepath.Join(dir, "topics", "serve-test", "*", "clean-shutdown"))
	if len(checkpoints) != 1 {
		t.Fatalf("want one clean-shutdown checkpoint for the partition, found %v", checkpoints)
	}

	cmd, stderr = startServe(t, dir, addr)
	defer stopServe(t, cmd, stderr)
	cl, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("serve-test"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got int
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records after restart", got, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("value-%d", r.Offset); string(r.Value) != want || string(r.Key) != fmt.Sprint(r.Offset) {
				t.Fatalf("offset %d holds %q=%q, want %d=%q", r.Offset, r.Key, r.Value, r.Offset, want)
			}
			got++
		})
	}
}

// TestServeRejectsBadConfig checks that bad flags and environment values
// stop serve with a message naming them, instead of being ignored.
func TestServeRejectsBadConfig(t *testing.T) {
	cases := []struct {
		env  []string
		args string
		want string
	}{
		{[]string{"SLUICE_PARTITIONS=many"}, "serve", `SLUICE_PARTITIONS="many": want an integer`},
		{[]string{"SLUICE_AUTO_CREATE=maybe"}, "serve", `SLUICE_AUTO_CREATE="maybe": want true or false`},
		{nil, "serve --fsync sometimes", `invalid argument "sometimes" for "--fsync" flag: want always, interval or never`},
		{[]string{"SLUICE_FSYNC=sometimes"}, "serve", `SLUICE_FSYNC="sometimes": want always, interval or never`},
		{nil, "launch", `unknown command "launch"`},
		{nil, "serve --partitions 4294967297", `--partitions 4294967297: want 1 to`},
		{nil, "serve --transaction-max-timeout 0s", `--transaction-max-timeout 0s: want a positive duration`},
		{[]string{"SLUICE_CONFIG=/nonexistent/sluice.yaml"}, "serve", `config file: open /nonexistent/sluice.yaml`},
		{nil, "serve --log-format yaml", `invalid argument "yaml" for "--log-format" flag: want text or json`},
		{nil, "serve --log-level loud", `invalid argument "loud" for "--log-level" flag: want debug, info, warn or error`},
		{[]string{"SLUICE_HTTP_ADMIN=sure"}, "serve", `SLUICE_HTTP_ADMIN="sure": want true or false`},
	}
	for _, c := range cases {
		cmd := sluiceCmd(strings.Fields(c.args)...)
		cmd.Env = append(cmd.Env, "SLUICE_DATA="+t.TempDir(), "SLUICE_LISTEN="+freeAddr(t), "SLUICE_HTTP=", "SLUICE_SCHEMA_REGISTRY=")
		cmd.Env = append(cmd.Env, c.env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v %s: exited with %v, want exit code 2 (bad usage)", c.env, c.args, err)
			continue
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("%v %s: output %q does not say %q", c.env, c.args, out, c.want)
		}
	}
}

// TestServeLogRequestsNeedsDebug checks that --log-requests without
// --log-level debug says why no request lines appear.
func TestServeLogRequestsNeedsDebug(t *testing.T) {
	addr := freeAddr(t)
	cmd, stderr := startServeArgs(t, addr, nil, "serve", "--data", t.TempDir(), "--listen", addr, "--log-requests")
	stopServe(t, cmd, stderr)
	if !strings.Contains(stderr.String(), "add --log-level debug to see them") {
		t.Fatalf("no hint about --log-level debug:\n%s", stderr.String())
	}
}
