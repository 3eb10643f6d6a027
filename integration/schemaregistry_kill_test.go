package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/internal/schemaregistry"
)

// srKillChildEnv, when set, turns TestSchemaRegistryKill9 into the
// child: a broker on that data directory with a registry on the
// address in srKillAddrEnv, serving until it is killed.
const (
	srKillChildEnv = "SLUICE_SR_KILL_CHILD_DIR"
	srKillAddrEnv  = "SLUICE_SR_KILL_CHILD_ADDR"
)

func srKillChild(dir, addr string) {
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	b, err := broker.New(broker.DataDir(dir), broker.ListenAddr("127.0.0.1:0"))
	if err != nil {
		fail(err)
	}
	if err := b.Start(); err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg, err := schemaregistry.New(ctx, schemaregistry.Config{Broker: b})
	if err != nil {
		fail(err)
	}
	a, err := reg.ListenAndServe(addr)
	if err != nil {
		fail(err)
	}
	fmt.Println("listening", a)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	<-ch // SIGKILL ends the process before this
	reg.Close()
	b.Close()
	os.Exit(0)
}

// startSRProc starts the child and returns the registry's address and
// a function that kills it with SIGKILL and waits for it.
func startSRProc(t *testing.T, dir, addr string) (string, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSchemaRegistryKill9$", "-test.count=1")
	cmd.Env = append(os.Environ(), srKillChildEnv+"="+dir, srKillAddrEnv+"="+addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	got := ""
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "listening" {
			got = f[1]
			break
		}
		if len(f) > 0 && f[0] == "error" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child: %s", sc.Text())
		}
	}
	if got == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("child exited before listening")
	}
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(done)
	}()
	return got, func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// srRegister registers schema in subject and returns its id; ok false
// when the request failed (the registry was killed under it).
func srRegister(hc *http.Client, url, subject, schema string) (int, bool) {
	body, _ := json.Marshal(map[string]string{"schema": schema})
	resp, err := hc.Post(url+"/subjects/"+subject+"/versions", "application/vnd.schemaregistry.v1+json", bytes.NewReader(body))
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var v struct {
		ID int `json:"id"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&v) != nil || v.ID <= 0 {
		return 0, false
	}
	return v.ID, true
}

// TestSchemaRegistryKill9 registers schemas from 8 clients while the
// process serving broker and registry is killed with SIGKILL, three
// times, and restarted on the same data directory. Every registration
// that was answered is then there with the id it was answered, and no
// id names two schemas.
func TestSchemaRegistryKill9(t *testing.T) {
	if dir := os.Getenv(srKillChildEnv); dir != "" {
		srKillChild(dir, os.Getenv(srKillAddrEnv))
		return
	}
	if testing.Short() {
		t.Skip("kill -9 test: not in -short")
	}
	dir := t.TempDir()
	addr := "127.0.0.1:0"
	type reg struct{ subject, schema string }
	var mu sync.Mutex
	acked := map[reg]int{}
	seq := 0
	hc := &http.Client{Timeout: 20 * time.Second}
	for round := range 3 {
		a, kill := startSRProc(t, dir, addr)
		addr = a // restart on the same port
		url := "http://" + a
		const workers, perRound = 8, 40
		var wg sync.WaitGroup
		enough := make(chan struct{})
		var once sync.Once
		n := 0
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					seq++
					i := seq
					mu.Unlock()
					r := reg{fmt.Sprintf("kill-%d-%d", w, i), fmt.Sprintf(`{"type":"record","name":"R%d","fields":[{"name":"f%d","type":"int","default":0}]}`, i, i)}
					id, ok := srRegister(hc, url, r.subject, r.schema)
					if !ok {
						return // killed
					}
					mu.Lock()
					acked[r] = id
					n++
					if n >= perRound {
						once.Do(func() { close(enough) })
					}
					mu.Unlock()
				}
			}()
		}
		stopped := make(chan struct{})
		go func() { wg.Wait(); close(stopped) }()
		select {
		case <-enough:
		case <-stopped:
			kill()
			t.Fatalf("round %d: every client stopped before %d registrations were acknowledged", round, perRound)
		}
		kill() // mid-registration: the workers' requests fail and they stop
		<-stopped
		t.Logf("round %d: %d registrations acknowledged so far", round, len(acked))
	}

	a, kill := startSRProc(t, dir, addr)
	defer kill()
	url := "http://" + a
	byID := map[int]reg{}
	for r, id := range acked {
		if other, dup := byID[id]; dup {
			t.Fatalf("id %d was answered for two registrations: %v and %v", id, other, r)
		}
		byID[id] = r
		body, _ := json.Marshal(map[string]string{"schema": r.schema})
		resp, err := hc.Post(url+"/subjects/"+r.subject, "application/vnd.schemaregistry.v1+json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			ID int `json:"id"`
		}
		json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if resp.StatusCode != 200 || v.ID != id {
			t.Fatalf("after the kills, %s in %s: status %d id %d, acknowledged with id %d", r.schema, r.subject, resp.StatusCode, v.ID, id)
		}
		resp, err = hc.Get(fmt.Sprintf("%s/schemas/ids/%d/schema", url, id))
		if err != nil {
			t.Fatal(err)
		}
		text, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(text) != r.schema {
			t.Fatalf("after the kills, id %d names %s, acknowledged for %s", id, text, r.schema)
		}
	}
	// A registration after the kills takes a new id.
	id, ok := srRegister(hc, url, "kill-after", `{"type":"record","name":"After","fields":[]}`)
	if !ok {
		t.Fatal("registration after the kills failed")
	}
	if _, dup := byID[id]; dup {
		t.Fatalf("id %d reused after the kills", id)
	}
	if len(acked) < 3*40 {
		t.Fatalf("only %d registrations acknowledged", len(acked))
	}
}
