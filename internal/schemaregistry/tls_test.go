package schemaregistry

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
)

// TestTLSReloadAndClientCerts: served with the broker's HTTPSConfig, the
// registry requires a client certificate signed by the client CA when
// SASL is off, takes the user for ACLs from its common name, and a
// ReloadTLS of the broker changes the certificate new connections see.
func TestTLSReloadAndClientCerts(t *testing.T) {
	certs := brokertest.NewCerts(t, "registry-ca")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	install := func(cert, key string) {
		t.Helper()
		for _, f := range [][2]string{{cert, certFile}, {key, keyFile}} {
			b, err := os.ReadFile(f[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f[1], b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(certs.ServerCert, certs.ServerKey)
	b := brokertest.Start(t, broker.TLSFiles(certFile, keyFile, certs.CAFile),
		broker.Authorization(true), broker.SuperUsers("alice"))
	if b.SASLEnabled() {
		t.Fatal("SASL on")
	}
	reg, err := New(context.Background(), Config{Broker: b, TLS: b.HTTPSConfig(true)})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	addr, err := reg.ListenAndServe("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	get := func(tc *tls.Config) (*http.Response, error) {
		tr := &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("https://" + addr + "/config")
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	if _, err := get(certs.ClientTLS(t, "")); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	resp, err := get(certs.ClientTLS(t, "alice"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("alice (superuser) GET /config: %v %v", resp, err)
	}
	if cn := resp.TLS.PeerCertificates[0].Subject.CommonName; cn != "sluice-test-server" {
		t.Fatalf("server certificate %q", cn)
	}
	if resp, err := get(certs.ClientTLS(t, "bob")); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("bob (no ACL) GET /config: %v %v, want 403", resp, err)
	}

	newCert, newKey := certs.Issue(t, "server-2", "sluice-test-server-2", true)
	install(newCert, newKey)
	if err := b.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	resp, err = get(certs.ClientTLS(t, "alice"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after the reload: %v %v", resp, err)
	}
	if cn := resp.TLS.PeerCertificates[0].Subject.CommonName; cn != "sluice-test-server-2" {
		t.Fatalf("server certificate after the reload %q, want sluice-test-server-2", cn)
	}
}
