package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Burrow (Debian's burrow package, LinkedIn's lag monitor) reads group
// commits straight from __consumer_offsets, with sarama, and keeps its
// own state in ZooKeeper (Debian's zookeeper package serves).

const zkServer = "/usr/share/zookeeper/bin/zkServer.sh"

// freePort returns a port the kernel picked for 127.0.0.1:0, for the
// outside programs whose configs need a number (ZooKeeper, Burrow's HTTP
// server). The listener is closed first, so another process could take
// the port in between; nothing else here binds ports by number.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startGroup starts cmd in its own process group, killed (the group:
// zkServer.sh's java child too) when the test ends.
func startGroup(t *testing.T, who string, cmd *exec.Cmd) *lockedBuffer {
	t.Helper()
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", who, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", who, out.String())
		}
	})
	return out
}

// poll calls cond every 200 ms until it holds or ctx ends: an outside
// program's state can only be asked for, not waited on.
func poll(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// burrowLag is the part of Burrow's /v3/kafka/CLUSTER/consumer/GROUP/lag
// answer the test reads.
type burrowLag struct {
	Error  bool `json:"error"`
	Status struct {
		TotalLag   int64 `json:"totallag"`
		Partitions []struct {
			Topic      string `json:"topic"`
			Partition  int32  `json:"partition"`
			CurrentLag int64  `json:"current_lag"`
			End        struct {
				Offset int64 `json:"offset"`
			} `json:"end"`
		} `json:"partitions"`
	} `json:"status"`
}

// TestBurrowLag: Burrow, reading Sluice's __consumer_offsets, reports a
// group's committed offset and lag, and follows the group's next commit.
func TestBurrowLag(t *testing.T) {
	burrow, err := exec.LookPath("Burrow")
	if err != nil {
		needTool(t, "Burrow not installed (apt-get install burrow)")
	}
	if _, err := os.Stat(zkServer); err != nil {
		needTool(t, "ZooKeeper not installed (apt-get install zookeeper), which Burrow needs")
	}
	if _, err := exec.LookPath("java"); err != nil {
		needTool(t, "java not installed (apt-get install zookeeper brings it)")
	}
	ctx := ctxT(t, 90*time.Second)
	n := startNode(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "lagtopic"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "lagtopic", Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	commit := func(off int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.AddOffset("lagtopic", 0, off, -1)
		if resp, err := adm.CommitOffsets(ctx, "lagger", os); err != nil || resp.Error() != nil {
			t.Fatalf("commit %d: %v %v", off, err, resp.Error())
		}
	}
	commit(5)

	dir := t.TempDir()
	zkPort := freePort(t)
	zkCfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(zkCfg, fmt.Appendf(nil, "tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n", filepath.Join(dir, "zk"), zkPort), 0o644); err != nil {
		t.Fatal(err)
	}
	zk := exec.Command(zkServer, "start-foreground", zkCfg)
	zk.Env = append(os.Environ(), "ZOO_LOG_DIR="+dir)
	startGroup(t, "zookeeper", zk)
	zkAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(zkPort))
	// Serving once its "srvr" command answers (it accepts connections
	// before it serves sessions).
	poll(t, ctx, "ZooKeeper to serve", func() bool {
		c, err := net.DialTimeout("tcp", zkAddr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("srvr")); err != nil {
			return false
		}
		b, _ := io.ReadAll(c)
		return strings.Contains(string(b), "Mode: standalone")
	})

	httpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	conf := fmt.Sprintf(`[general]
pidfile=%q
[logging]
level="info"
[zookeeper]
servers=[%q]
timeout=6
root-path="/burrow"
[client-profile.sluice]
client-id="burrow"
kafka-version="2.0.0"
[cluster.local]
class-name="kafka"
servers=[%q]
client-profile="sluice"
topic-refresh=1
offset-refresh=1
[consumer.local]
class-name="kafka"
cluster="local"
servers=[%q]
client-profile="sluice"
start-latest=false
[httpserver.default]
address=%q
[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1
`, filepath.Join(dir, "burrow.pid"), zkAddr, n.addr, n.addr, httpAddr)
	if err := os.WriteFile(filepath.Join(dir, "burrow.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	startGroup(t, "Burrow", exec.Command(burrow, "--config-dir", dir))

	lag := func() (burrowLag, bool) {
		var l burrowLag
		resp, err := http.Get("http://" + httpAddr + "/v3/kafka/local/consumer/lagger/lag")
		if err != nil {
			return l, false
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&l) != nil || l.Error {
			return l, false
		}
		return l, true
	}
	want := func(committed int64) {
		t.Helper()
		poll(t, ctx, fmt.Sprintf("Burrow to report lagger at %d, lag %d", committed, 20-committed), func() bool {
			l, ok := lag()
			if !ok {
				return false
			}
			return len(l.Status.Partitions) == 1 && l.Status.Partitions[0].Topic == "lagtopic" &&
				l.Status.Partitions[0].End.Offset == committed && l.Status.Partitions[0].CurrentLag == 20-committed &&
				l.Status.TotalLag == 20-committed
		})
	}
	want(5)
	commit(12) // the group moves on
	want(12)
}
