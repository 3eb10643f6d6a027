package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSchemaCommands runs sluice serve with the schema registry on a
// free port and drives it with the sluice schema commands.
func TestSchemaCommands(t *testing.T) {
	dir, addr, srAddr := t.TempDir(), freeAddr(t), freeAddr(t)
	cmd, stderr := startServe(t, dir, addr, "SLUICE_SCHEMA_REGISTRY="+srAddr)
	defer stopServe(t, cmd, stderr)
	// The registry listens once it has read _schemas, after the broker.
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", srAddr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the schema registry never listened on %s", srAddr)
		}
	}
	files := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := write("v1.avsc", `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`)
	v2 := write("v2.avsc", `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}`)
	bad := write("bad.avsc", `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`)
	proto := write("point.proto", `syntax = "proto3"; message Point { int32 x = 1; }`)
	url := "http://" + srAddr
	sluice := func(wantCode int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		code := run(ctx, append(args, "--registry", url), strings.NewReader(""), &out, &errb)
		if code != wantCode {
			t.Fatalf("sluice %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	for _, c := range []struct {
		code int
		args []string
		want string
	}{
		{0, []string{"schema", "register", "orders-value", "--file", v1}, "registered orders-value version 1 id 1\n"},
		{0, []string{"schema", "register", "orders-value", "--file", v1}, "registered orders-value version 1 id 1\n"},
		{0, []string{"schema", "compatibility", "orders-value", "--file", v2}, "compatible\n"},
		{1, []string{"schema", "compatibility", "orders-value", "--file", bad}, "incompatible"},
		{1, []string{"schema", "register", "orders-value", "--file", bad}, "error code 409"},
		{0, []string{"schema", "register", "orders-value", "--file", v2}, "registered orders-value version 2 id 2\n"},
		{0, []string{"schema", "register", "points-value", "--file", proto}, "registered points-value version 1 id 3\n"},
		{0, []string{"schema", "get", "orders-value", "--version", "1"}, "# subject orders-value, version 1, id 1, type AVRO\n"},
		{0, []string{"schema", "get", "--id", "3"}, "# id 3, type PROTOBUF\nsyntax"},
		{0, []string{"schema", "list"}, "orders-value  1,2       2          AVRO\npoints-value  1         3          PROTOBUF\n"},
		{0, []string{"schema", "config", "orders-value", "--set", "full_transitive"}, "orders-value: compatibility FULL_TRANSITIVE, mode READWRITE\n"},
		{0, []string{"schema", "config"}, "global: compatibility BACKWARD, mode READWRITE\n"},
		{0, []string{"schema", "delete", "points-value", "--permanent"}, "deleted points-value versions [1] permanently\n"},
		{1, []string{"schema", "get", "points-value"}, "error code 40401"},
		{2, []string{"schema", "get"}, "give a subject or --id"},
	} {
		if got := sluice(c.code, c.args...); !strings.Contains(got, c.want) {
			t.Fatalf("sluice %s:\n%s\nwant it to contain %q", strings.Join(c.args, " "), got, c.want)
		}
	}
}
