package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
	"github.com/sluicedb/sluice/internal/console"
	"github.com/sluicedb/sluice/internal/schemaregistry"
)

// needTool returns the path of an outside program, skipping when it is
// absent except under CI=true, where a missing tool fails the test.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found and CI=true: install Debian's %s package", name, pkg)
		}
		t.Skipf("%s not installed (apt-get install %s); skipping", name, pkg)
	}
	return p
}

// TestUserAndACLCommands drives sluice user and sluice acl against a
// secured broker, over SASL_SSL as the bootstrap superuser.
func TestUserAndACLCommands(t *testing.T) {
	certs := brokertest.NewCerts(t, "cmd-test-ca")
	b := brokertest.Secure(t, certs)
	// The connecting user's password comes from SLUICE_PASSWORD here; on
	// user create, --new-password is the new user's.
	t.Setenv("SLUICE_PASSWORD", "admin-secret")
	conn := []string{"-b", b.ListenerAddr(broker.SASLSSL), "--tls-ca", certs.CAFile, "--user", "admin"}
	run := func(mk func() *cobra.Command, args ...string) (string, error) {
		t.Helper()
		cmd := mk()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append(args, conn...))
		err := cmd.Execute()
		return out.String(), err
	}
	must := func(mk func() *cobra.Command, args ...string) string {
		t.Helper()
		out, err := run(mk, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	must(newUserCmd, "create", "alice", "--new-password", "pw-alice")
	must(newUserCmd, "create", "bob", "--new-password", "pw-bob", "--mechanism", "SCRAM-SHA-256")
	out := must(newUserCmd, "list")
	for _, want := range []string{"admin", "alice", "SCRAM-SHA-512 (8192 iterations)", "bob"} {
		if !strings.Contains(out, want) {
			t.Fatalf("user list lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "pw-alice") {
		t.Fatal("user list shows a password")
	}
	must(newUserCmd, "delete", "bob")
	if out = must(newUserCmd, "list"); strings.Contains(out, "bob") {
		t.Fatalf("bob still listed after delete:\n%s", out)
	}
	if _, err := run(newUserCmd, "delete", "bob"); err == nil {
		t.Fatal("deleting a missing user succeeded")
	}
	if _, err := run(newUserCmd, "create", "carol"); err == nil || !strings.Contains(err.Error(), "--new-password") {
		t.Fatalf("create without a password: %v", err)
	}

	must(newACLCmd, "create", "--allow-principal", "User:alice", "--operation", "read,describe", "--topic", "orders", "--group", "billing")
	must(newACLCmd, "create", "--deny-principal", "alice", "--operation", "write", "--topic", "tmp-", "--resource-pattern-type", "prefixed")
	out = must(newACLCmd, "list")
	if n := strings.Count(out, "User:alice"); n != 5 {
		t.Fatalf("acl list shows %d bindings of alice, want 5:\n%s", n, out)
	}
	out = must(newACLCmd, "list", "--topic", "tmp-x", "--resource-pattern-type", "match")
	if !strings.Contains(out, "PREFIXED") || !strings.Contains(out, "DENY") || strings.Contains(out, "orders") {
		t.Fatalf("acl list MATCH tmp-x:\n%s", out)
	}
	out = must(newACLCmd, "delete", "--group", "billing")
	if strings.Count(out, "billing") != 2 {
		t.Fatalf("acl delete --group billing:\n%s", out)
	}
	if out = must(newACLCmd, "list"); strings.Count(out, "User:alice") != 3 {
		t.Fatalf("after delete:\n%s", out)
	}
	for _, bad := range [][]string{
		{"create", "--operation", "read", "--topic", "t"},                               // no principal
		{"create", "--allow-principal", "User:a", "--topic", "t"},                       // no operation
		{"create", "--allow-principal", "User:a", "--operation", "read"},                // no resource
		{"create", "--allow-principal", "User:a", "--operation", "fly", "--topic", "t"}, // bad operation
		{"create", "--allow-principal", "User:a", "--operation", "read", "--topic", "t", "--resource-pattern-type", "match"},
	} {
		if _, err := run(newACLCmd, bad...); err == nil {
			t.Errorf("acl %v succeeded", bad)
		}
	}
}

// TestREADMESecurity runs the README's Security setup as written
// (openssl, sluice serve with SASL_SSL, sluice user/topic/acl, kcat),
// on a free port instead of 9093, with this test binary as sluice.
func TestREADMESecurity(t *testing.T) {
	needTool(t, "openssl", "openssl")
	needTool(t, "kcat", "kcat")
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## Security\n")
	if !ok {
		t.Fatal("README has no Security section")
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatal("README Security section has no sh block")
	}
	script, _, _ := strings.Cut(block, "```")
	port := strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
	web := port
	for web == port { // a port freed a moment ago may be handed out again
		web = strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
	}
	// The walkthrough runs beside the quick start's broker: it binds
	// none of serve's default addresses, and cleans up after itself.
	serveLine := regexp.MustCompile(`(?s)sluice serve .*?&\n`).FindString(script)
	httpFlag := regexp.MustCompile(`--http (\S+)`).FindStringSubmatch(serveLine)
	if httpFlag == nil || httpFlag[1] == console.DefaultAddr || !strings.Contains(serveLine, "--schema-registry ''") {
		t.Fatalf("the walkthrough's broker would collide with the quick start's (console %s, schema registry %s):\n%s", console.DefaultAddr, schemaregistry.DefaultAddr, serveLine)
	}
	script = strings.ReplaceAll(script, "9093", port)
	script = strings.ReplaceAll(script, strings.TrimPrefix(httpFlag[1], "127.0.0.1:"), web)
	script += "\necho \"left: $(jobs -p | wc -l) jobs, SLUICE_BROKERS=${SLUICE_BROKERS-}, $(ls)\"\n"

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := "#!/bin/sh\nSLUICE_TEST_MAIN=1 exec '" + self + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "sluice"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	full := "set -euo pipefail\ntrap 'j=$(jobs -p); [ -z \"$j\" ] || kill $j 2>/dev/null; wait' EXIT\n" + script
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", full)
	cmd.Dir = dir
	// SLUICE_HTTP= turns the console off, so that its default port (which
	// another program may hold) does not matter here; the script's
	// --http (on a free port) turns it on for its own broker.
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "SLUICE_HTTP=", "SLUICE_SCHEMA_REGISTRY=")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("README Security script: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), stderr.String())
	}
	for _, want := range []string{"created user alice", "User:alice", "hello, securely", "console without login: 401", `"name":"orders"`, "left: 0 jobs, SLUICE_BROKERS=, bin\n"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("README Security script output lacks %q:\n%s\nstderr:\n%s", want, out.String(), stderr.String())
		}
	}
	if strings.Contains(stderr.String()+out.String(), "alice-secret\n") || strings.Contains(stderr.String(), "admin-secret") {
		t.Fatalf("a password appears in the broker's or the tools' output:\n%s", stderr.String())
	}
}

// TestServeSIGHUPReloadsCertificate: sluice serve with an SSL listener
// (configured by environment) serves a new certificate after SIGHUP.
func TestServeSIGHUPReloadsCertificate(t *testing.T) {
	certs := brokertest.NewCerts(t, "hup-ca")
	addr := freeAddr(t)
	cmd, stderr := startServe(t, t.TempDir(), addr, "SLUICE_LISTENERS=SSL://"+addr,
		"SLUICE_TLS_CERT="+certs.ServerCert, "SLUICE_TLS_KEY="+certs.ServerKey)
	defer stopServe(t, cmd, stderr)
	cn := func() string {
		c, err := tls.Dial("tcp", addr, certs.ClientTLS(t, ""))
		if err != nil {
			t.Fatalf("TLS dial: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := cn(); got != "sluice-test-server" {
		t.Fatalf("CN %q before SIGHUP", got)
	}
	certs.Issue(t, "server", "after-hup", true)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Wait for the reload to show in new handshakes.
	deadline := time.Now().Add(20 * time.Second)
	for cn() != "after-hup" {
		if time.Now().After(deadline) {
			t.Fatal("the certificate was not reloaded after SIGHUP")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSecureClientCommands: topic, produce and consume over SASL_SSL with
// the shared connection flags; a wrong password is refused; mirror copies
// from the secured broker with its --from-* flags.
func TestSecureClientCommands(t *testing.T) {
	certs := brokertest.NewCerts(t, "cli-ca")
	b := brokertest.Secure(t, certs)
	sec := []string{"-b", b.ListenerAddr(broker.SASLSSL), "--tls-ca", certs.CAFile, "--user", "admin", "--password", "admin-secret"}
	ok(t, "", append([]string{"topic", "create", "orders"}, sec...)...)
	ok(t, "k1:v1\nk2:v2\n", append([]string{"produce", "-t", "orders", "-K", ":"}, sec...)...)
	r := ok(t, "", append([]string{"consume", "-t", "orders", "-e", "-f", "%k=%v\n"}, sec...)...)
	if r.stdout != "k1=v1\nk2=v2\n" {
		t.Fatalf("consume over SASL_SSL printed %q", r.stdout)
	}
	bad := append([]string{"topic", "list"}, sec[:len(sec)-1]...)
	if r := sluice(t, "", append(bad, "wrong")...); r.code != 1 || !strings.Contains(r.stderr, "SASL") {
		t.Fatalf("wrong password: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := sluice(t, "", "topic", "list", "-b", b.ListenerAddr(broker.SASLSSL), "--tls-ca", "/nonexistent.pem"); r.code != 2 || !strings.Contains(r.stderr, "--tls-ca") {
		t.Fatalf("missing CA file: exit %d, stderr %q", r.code, r.stderr)
	}

	tgt := brokertest.Start(t).Addr()
	ok(t, "", "mirror", "--from", b.ListenerAddr(broker.SASLSSL), "--to", tgt, "--topics", "orders", "--once",
		"--from-tls-ca", certs.CAFile, "--from-user", "admin", "--from-password", "admin-secret")
	r = ok(t, "", "consume", "-t", "orders", "-e", "-f", "%k=%v\n", "-b", tgt)
	if r.stdout != "k1=v1\nk2=v2\n" {
		t.Fatalf("mirrored records: %q", r.stdout)
	}
}
