package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedb/sluice/broker/brokertest"
	"github.com/sluicedb/sluice/internal/schemaregistry"
)

// startRegistry serves a schema registry over a test broker and returns
// its URL.
func startRegistry(t *testing.T) string {
	t.Helper()
	reg, err := schemaregistry.New(context.Background(), schemaregistry.Config{Broker: brokertest.Start(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg.Handler())
	t.Cleanup(func() {
		srv.Close()
		reg.Close()
	})
	return srv.URL
}

// TestSchemaDelete: soft and permanent deletes of versions and subjects,
// with --permanent also of what is soft-deleted already, and the
// registry's errors otherwise.
func TestSchemaDelete(t *testing.T) {
	url := startRegistry(t)
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := file("v1.avsc", `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`)
	v2 := file("v2.avsc", `{"fields":[{"name":"a","type":"int"},{"name":"b","type":"int","default":0}],"type":"record","name":"R"}`)
	want := func(r result, stdout string) {
		t.Helper()
		if r.stdout != stdout {
			t.Fatalf("stdout %q, want %q", r.stdout, stdout)
		}
	}
	schema := func(args ...string) []string { return append(append([]string{"schema"}, args...), "--registry", url) }

	want(ok(t, "", schema("register", "s", "--file", v1)...), "registered s version 1 id 1\n")
	want(ok(t, "", schema("register", "s", "--file", v2, "--normalize")...), "registered s version 2 id 2\n")
	// Stored normalized: keys sorted.
	want(ok(t, "", schema("get", "s")...), "# subject s, version 2, id 2, type AVRO\n"+
		`{"fields":[{"name":"a","type":"int"},{"default":0,"name":"b","type":"int"}],"name":"R","type":"record"}`+"\n")

	want(ok(t, "", schema("delete", "s", "--version", "1")...), "deleted s version 1\n")
	fails(t, 1, "error code 40406", "", schema("delete", "s", "--version", "1")...)
	want(ok(t, "", schema("delete", "s", "--version", "1", "--permanent")...), "deleted s version 1 permanently\n")
	fails(t, 1, "error code 40402", "", schema("delete", "s", "--version", "1", "--permanent")...)

	want(ok(t, "", schema("delete", "s")...), "deleted s versions [2]\n")
	want(ok(t, "", schema("list", "--deleted")...), "SUBJECT  VERSIONS  LATEST ID  TYPE\ns        2         2          AVRO\n")
	fails(t, 1, "error code 40404", "", schema("delete", "s")...)
	want(ok(t, "", schema("delete", "s", "--permanent")...), "deleted s versions [2] permanently\n")
	fails(t, 1, "error code 40401", "", schema("delete", "s", "--permanent")...)
	want(ok(t, "", schema("list", "--deleted")...), "SUBJECT  VERSIONS  LATEST ID  TYPE\n")
}

// TestSchemaCheckOrder: a subcommand's own checks and input come before
// the client, whose mistakes are usage errors too.
func TestSchemaCheckOrder(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	fails(t, 2, "--tls-ca: open "+missing, "", "schema", "list", "--tls-ca", missing)
	fails(t, 2, "give the schema with --file", "", "schema", "register", "s", "--tls-ca", missing)
	fails(t, 2, `--version "x": want a version number, latest or all`, "", "schema", "compatibility", "s", "--version", "x", "--tls-ca", missing)
	fails(t, 2, "schema get: give a subject or --id, not both", "", "schema", "get", "s", "--id", "1", "--tls-ca", missing)
}
