package readmeshell

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notRun lists the README's shell blocks this test does not run, each by
// a line the block contains exactly, with the reason. Every other ```sh
// block runs. A marker that matches no block fails the test.
var notRun = map[string]string{
	"go install github.com/sluicedb/sluice/cmd/sluice@latest": "installs the published module, which needs the network; " +
		"the test puts a sluice built from this checkout on PATH in its place",
	"./scripts/test.sh": "the test suite this test is part of",
	"go run ./cmd/sluice mirror --from 127.0.0.1:9092 --to kafka-1:9092,kafka-2:9092 --http 127.0.0.1:9645": "needs a Kafka cluster " +
		"at kafka-1:9092 and kafka-2:9092 (TestMirror* in cmd/sluice runs the mirror)",
	"go -C integration test . -run 'Kafkajs|ConfluentKafka|KafkaPython' -v": "installs kafkajs with npm ci from the npm registry, " +
		"which needs the network (the integration module runs these tests in CI)",
	"go -C integration test . -run TestFranzGoSuite -v": "franz-go's kgo suite runs for many minutes; " +
		"scripts/test.sh runs it with the integration module",
	"go run ./tools/benchcompare --sluice /tmp/sluice --kfake /tmp/kfakeserver --rounds 3": "a measurement of many minutes " +
		"(every workload, three rounds, on each broker), the method of docs/benchmarks.md",
	"go test ./internal/acceptor -run '^$' -bench . -benchtime 2s -count 3": "benchmark runs of many minutes, " +
		"the method of docs/benchmarks.md; scripts/test.sh runs these packages' tests",
}

// A shell block of the README, its section and the output the README
// shows after it (empty when none).
type shBlock struct {
	line    int // of the opening fence
	section string
	body    string
	want    string
}

var fence = regexp.MustCompile("(?m)^```([a-z]*)\n")

// readmeBlocks returns README.md's ```sh blocks in document order. The
// output a block prints is the plain ``` block after it when the prose
// between them ends with "prints".
func readmeBlocks(t *testing.T, readme string) []shBlock {
	t.Helper()
	var blocks []shBlock
	section := ""
	pos := 0
	for {
		loc := fence.FindStringSubmatchIndex(readme[pos:])
		if loc == nil {
			break
		}
		start, bodyStart := pos+loc[0], pos+loc[1]
		lang := readme[pos+loc[2] : pos+loc[3]]
		for _, l := range strings.Split(readme[pos:start], "\n") {
			if h, ok := strings.CutPrefix(l, "## "); ok {
				section = h
			}
		}
		end := strings.Index(readme[bodyStart:], "\n```\n")
		if end < 0 {
			t.Fatalf("README.md:%d: unclosed code block", strings.Count(readme[:start], "\n")+1)
		}
		body := readme[bodyStart : bodyStart+end+1]
		pos = bodyStart + end + len("\n```\n")
		if lang != "sh" {
			continue
		}
		b := shBlock{line: strings.Count(readme[:start], "\n") + 1, section: section, body: body}
		if next := fence.FindStringSubmatchIndex(readme[pos:]); next != nil && readme[pos+next[2]:pos+next[3]] == "" {
			prose := regexp.MustCompile(`<!--.*?-->`).ReplaceAllString(readme[pos:pos+next[0]], "")
			if strings.HasSuffix(strings.TrimSpace(prose), "prints") {
				wStart := pos + next[1]
				if wEnd := strings.Index(readme[wStart:], "\n```\n"); wEnd >= 0 {
					b.want = readme[wStart : wStart+wEnd+1]
				}
			}
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// foreground matches a line that starts the broker in the foreground, as
// a reader does in a terminal of its own and stops with Ctrl-C.
var foreground = regexp.MustCompile(`^(go run \./cmd/sluice|\./sluice|sluice) serve\b[^&]*$`)

// TestREADMEShellBlocks runs every ```sh block of README.md, top to
// bottom, as a new user would: from a fresh copy of the checkout's files,
// with a fresh HOME, one bash session per section (set -e, so every
// command of a block must succeed), inside private network and mount
// namespaces (the README's default ports and /tmp paths are the test's
// own). A line that starts the broker in the foreground runs as in a
// second terminal: the rest of its block runs once `sluice health`
// answers, then the broker gets Ctrl-C (SIGINT) and must exit 0. Output
// the README shows after a block must appear in the block's output, and
// a section must leave no process running.
func TestREADMEShellBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the README's commands, builds included")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a private network namespace (unshare --net), so the README's default ports stay private to the test")
	}
	for _, tool := range []string{"unshare", "nsenter", "ip", "mount", "bash", "git", "kcat", "curl", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing: the README's commands need it", tool)
			}
			t.Skipf("%s is missing: the README's commands need it", tool)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout, so no tracked files to copy: %v", err)
	}
	repo := strings.TrimSpace(string(top))
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, string(readme))
	used := map[string]bool{}

	// The private /tmp: inside the namespaces, root is /tmp.
	root := t.TempDir()
	for _, d := range []string{"src", "home", "bin"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyTracked(t, repo, filepath.Join(root, "src"))
	// `sluice` on PATH, built from this checkout, stands in for the
	// README's go install.
	build := exec.Command(goBin, "build", "-o", filepath.Join(root, "bin", "sluice"), "./cmd/sluice")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	gocache, _ := exec.Command(goBin, "env", "GOCACHE").Output()
	gomodcache, _ := exec.Command(goBin, "env", "GOMODCACHE").Output()
	env := []string{
		"HOME=/tmp/home",
		"USER=root",
		"LANG=C.UTF-8",
		"PATH=/tmp/bin:" + filepath.Dir(goBin) + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		// The module cache .ci/run filled, and the build cache; no
		// network in the namespace, so no module downloads.
		"GOCACHE=" + strings.TrimSpace(string(gocache)),
		"GOMODCACHE=" + strings.TrimSpace(string(gomodcache)),
		"GOFLAGS=-mod=mod",
		"GOPROXY=off",
		"GOTOOLCHAIN=local",
	}
	if v, ok := os.LookupEnv("CI"); ok {
		env = append(env, "CI="+v)
	}

	ns := newNamespace(t, root)

	// Group the blocks by section, in order.
	var sections [][]shBlock
	for _, b := range blocks {
		if len(sections) == 0 || sections[len(sections)-1][0].section != b.section {
			sections = append(sections, nil)
		}
		sections[len(sections)-1] = append(sections[len(sections)-1], b)
	}
	for _, sec := range sections {
		var run []shBlock
		for _, b := range sec {
			skip := false
			for marker, reason := range notRun {
				if containsLine(b.body, marker) {
					used[marker] = true
					skip = true
					t.Logf("README.md:%d (%s): not run: %s", b.line, b.section, reason)
				}
			}
			if !skip {
				run = append(run, b)
			}
		}
		if len(run) > 0 {
			t.Run(strings.ReplaceAll(sec[0].section, " ", "_"), func(t *testing.T) {
				runSection(t, ns, root, env, run)
			})
		}
	}
	for marker := range notRun {
		if !used[marker] {
			t.Errorf("no README block has the line %q listed as not run: update notRun", marker)
		}
	}
}

// containsLine reports whether a line of body is marker, ignoring a
// trailing comment and spaces.
func containsLine(body, marker string) bool {
	for _, l := range strings.Split(body, "\n") {
		if l == marker || strings.HasPrefix(l, marker+" ") {
			return true
		}
	}
	return false
}

// copyTracked copies the files git tracks in repo, as they are in the
// work tree, to dst.
func copyTracked(t *testing.T, repo, dst string) {
	t.Helper()
	out, err := exec.Command("git", "-C", repo, "ls-files", "-z").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(repo, name)
		fi, err := os.Lstat(src)
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree
			}
			t.Fatal(err)
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, to); err != nil {
				t.Fatal(err)
			}
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, data, fi.Mode().Perm()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// namespace is a process holding private network and mount namespaces:
// loopback up, /tmp bound to the test's directory.
type namespace struct {
	pid   int
	netns string // the namespace's /proc/PID/ns/net link
}

func newNamespace(t *testing.T, root string) *namespace {
	t.Helper()
	hold := exec.Command("unshare", "--net", "--mount", "--", "sh", "-c",
		`mount --bind "$1" /tmp && ip link set lo up && echo ready && exec cat`, "sh", root)
	stdin, err := hold.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := hold.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	hold.Stderr = &stderr
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		_ = stdin.Close()
		_ = hold.Wait()
		t.Skipf("cannot set up a private network namespace: %s", strings.TrimSpace(stderr.String()))
	}
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", hold.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	ns := &namespace{pid: hold.Process.Pid, netns: link}
	t.Cleanup(func() {
		for _, p := range ns.processes() {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		_ = stdin.Close()
		_ = hold.Wait()
	})
	return ns
}

// processes returns the processes in the namespace besides its holder.
func (ns *namespace) processes() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == ns.pid {
			continue
		}
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && link == ns.netns {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (ns *namespace) command(env []string, dir string, args ...string) *exec.Cmd {
	// nsenter's --wd would name a directory outside the mount namespace.
	full := append([]string{"-t", strconv.Itoa(ns.pid), "--net", "--mount", "--", "sh", "-c", `cd "$1" && shift && exec "$@"`, "sh", dir}, args...)
	cmd := exec.Command("nsenter", full...)
	cmd.Env = env
	return cmd
}

// describe names the processes for a failure message.
func describe(pids []int) string {
	var s []string
	for _, p := range pids {
		c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		s = append(s, fmt.Sprintf("%d %s", p, strings.TrimSpace(strings.ReplaceAll(string(c), "\x00", " "))))
	}
	return strings.Join(s, "; ")
}

// blockTimeout bounds one block; the README's blocks finish in seconds
// to a minute or two (builds) on a loaded machine.
const blockTimeout = 5 * time.Minute

// runSection runs a section's blocks in one bash session.
func runSection(t *testing.T, ns *namespace, root string, env []string, blocks []shBlock) {
	run := filepath.Join(root, "run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(run, "output")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer statusR.Close()
	sh := ns.command(env, "/tmp/src", "bash", "--norc", "--noprofile", "-s")
	sh.Stdout, sh.Stderr = logf, logf
	sh.ExtraFiles = []*os.File{statusW} // fd 3
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	statusW.Close()
	exited := make(chan error, 1)
	go func() { exited <- sh.Wait() }()
	status := make(chan string)
	go func() {
		sc := bufio.NewScanner(statusR)
		for sc.Scan() {
			status <- sc.Text()
		}
		close(status)
	}()
	output := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}
	failed := false
	defer func() {
		_ = stdin.Close()
		if !failed {
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("the session's bash: %v\n%s", err, output())
				}
			case <-time.After(blockTimeout):
				t.Errorf("the session's bash did not exit")
			}
		}
		if left := ns.processes(); len(left) > 0 {
			t.Errorf("the section left processes running: %s", describe(left))
			for _, p := range left {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
	}()
	if _, err := io.WriteString(stdin, "set -eo pipefail\n"); err != nil {
		t.Fatal(err)
	}
	n := 0
	// step runs a script in the session and waits for it to finish.
	step := func(b shBlock, script string) bool {
		n++
		file := filepath.Join(run, fmt.Sprintf("step%d.sh", n))
		if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		mark := len(output())
		fmt.Fprintf(stdin, ". /tmp/run/step%d.sh </dev/null\necho done %d >&3\n", n, n)
		select {
		case s := <-status:
			if s != fmt.Sprintf("done %d", n) {
				t.Fatalf("README.md:%d: unexpected status %q", b.line, s)
			}
			return true
		case err := <-exited:
			failed = true
			t.Errorf("README.md:%d: the block failed (%v); output:\n%s\nblock:\n%s", b.line, err, output()[mark:], script)
			return false
		case <-time.After(blockTimeout):
			failed = true
			t.Errorf("README.md:%d: the block did not finish in %v; output:\n%s", b.line, blockTimeout, output()[mark:])
			return false
		}
	}
	for _, b := range blocks {
		mark := len(output())
		if !runBlock(t, ns, env, b, step) {
			return
		}
		if b.want != "" {
			got := output()[mark:]
			if !inOrder(got, b.want) {
				t.Errorf("README.md:%d: the output does not show what the README says it prints:\n%s\ngot:\n%s", b.line, b.want, got)
			}
		}
	}
}

// runBlock runs a block: the lines before a foreground broker, the
// broker in its own terminal, the lines after it once it is ready, then
// Ctrl-C.
func runBlock(t *testing.T, ns *namespace, env []string, b shBlock, step func(shBlock, string) bool) bool {
	lines := strings.SplitAfter(b.body, "\n")
	for i, l := range lines {
		cmdLine, _, _ := strings.Cut(l, " #")
		cmdLine = strings.TrimSpace(cmdLine)
		if !foreground.MatchString(cmdLine) {
			continue
		}
		if i > 0 && !step(b, strings.Join(lines[:i], "")) {
			return false
		}
		var out bytes.Buffer
		srv := ns.command(env, "/tmp/src", "bash", "--norc", "--noprofile", "-c", cmdLine)
		srv.Stdout, srv.Stderr = &out, &out
		srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- srv.Wait() }()
		if !waitReady(t, ns, env, exited) {
			t.Errorf("README.md:%d: %q did not become ready; output:\n%s", b.line, cmdLine, out.String())
			_ = syscall.Kill(-srv.Process.Pid, syscall.SIGKILL)
			<-exited
			return false
		}
		ok := true
		if rest := strings.Join(lines[i+1:], ""); strings.TrimSpace(rest) != "" {
			ok = step(b, rest)
		}
		_ = syscall.Kill(-srv.Process.Pid, syscall.SIGINT) // Ctrl-C
		select {
		case err := <-exited:
			// go run exits 1 when its program got a signal, however it
			// exited; the broker's own word is its last log line.
			if (err != nil && !strings.HasPrefix(cmdLine, "go run ")) || !strings.Contains(out.String(), `msg="stopped cleanly"`) {
				t.Errorf("README.md:%d: %q after Ctrl-C: %v; output:\n%s", b.line, cmdLine, err, out.String())
				ok = false
			}
		case <-time.After(blockTimeout):
			t.Errorf("README.md:%d: %q did not stop on Ctrl-C", b.line, cmdLine)
			_ = syscall.Kill(-srv.Process.Pid, syscall.SIGKILL)
			<-exited
			ok = false
		}
		return ok
	}
	return step(b, b.body)
}

// waitReady polls `sluice health` (the README's readiness wait) until it
// succeeds or the broker exits.
func waitReady(t *testing.T, ns *namespace, env []string, exited chan error) bool {
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	for ctx.Err() == nil {
		select {
		case err := <-exited:
			exited <- err
			return false
		default:
		}
		if ns.command(env, "/tmp/src", "sluice", "health", "--timeout", "1s").Run() == nil {
			return true
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return false
}

// inOrder reports whether every line of want appears in got, in order.
func inOrder(got, want string) bool {
	gl := strings.Split(got, "\n")
	i := 0
	for _, w := range strings.Split(strings.TrimSuffix(want, "\n"), "\n") {
		for i < len(gl) && gl[i] != w {
			i++
		}
		if i == len(gl) {
			return false
		}
		i++
	}
	return true
}

// TestREADMEShellBlocksOutputs checks that the README's blocks with
// shown output are found with it, so their output checks cannot vanish
// unnoticed.
func TestREADMEShellBlocksOutputs(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"go -C examples run ./embedded\n":                                         "consumed order-1=shipped at offset 2\n",
		"kcat -b 127.0.0.1:9092 -C -t demo -o beginning -e -f '%o %k=%s %h\\n'\n": "2 k3=world source=readme\n",
	}
	for _, b := range readmeBlocks(t, string(readme)) {
		for cmd, out := range want {
			if strings.Contains(b.body, cmd) {
				if !strings.HasSuffix(b.want, out) {
					t.Errorf("README.md:%d: shown output %q, want it to end with %q", b.line, b.want, out)
				}
				delete(want, cmd)
			}
		}
	}
	for cmd := range want {
		t.Errorf("no README sh block runs %q", cmd)
	}
}
