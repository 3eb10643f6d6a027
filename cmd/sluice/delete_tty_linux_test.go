package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluicedb/sluice/broker/brokertest"
)

// openPTY returns both ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestTopicDeleteAsksOnTerminal answers the confirmation question on a
// terminal: "n" keeps the topic, "y" deletes it, and --yes skips it.
func TestTopicDeleteAsksOnTerminal(t *testing.T) {
	addr := brokertest.Start(t).Addr()
	ok(t, "", "topic", "create", "kept", "other", "-b", addr)
	for _, c := range []struct {
		answer, topic string
		code          int
		deleted       bool
	}{
		{"n\n", "kept", 1, false},
		{"\n", "kept", 1, false},
		{"y\n", "kept", 0, true},
		{"", "other", 0, true}, // --yes: no question
	} {
		master, slave := openPTY(t)
		args := []string{"topic", "delete", c.topic, "-b", addr}
		if c.answer == "" {
			args = append(args, "--yes")
		} else if _, err := master.WriteString(c.answer); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, slave, &out, &errOut)
		asked := strings.Contains(errOut.String(), "Delete topic(s) "+c.topic+" and all their records on "+addr+"? [y/N]")
		if code != c.code || asked != (c.answer != "") || strings.Contains(out.String(), "deleted") != c.deleted {
			t.Fatalf("answer %q: exit %d, stdout %q, stderr %q", c.answer, code, out.String(), errOut.String())
		}
		listed := strings.Contains(ok(t, "", "topic", "list", "-b", addr).stdout, c.topic+" ")
		if listed == c.deleted {
			t.Fatalf("answer %q: topic %s listed=%v after delete", c.answer, c.topic, listed)
		}
	}
}
