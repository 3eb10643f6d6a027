package brokertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs is a throwaway certificate authority for tests, with a server
// certificate for 127.0.0.1 and localhost, all written as PEM files in a
// temporary directory.
type Certs struct {
	Dir        string
	CAFile     string // the CA certificate (what clients and --tls-client-ca trust)
	ServerCert string
	ServerKey  string

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// NewCerts makes a CA named cn and a server certificate signed by it.
func NewCerts(t testing.TB, cn string) *Certs {
	t.Helper()
	c := &Certs{Dir: t.TempDir()}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("brokertest: CA certificate: %v", err)
	}
	c.ca, _ = x509.ParseCertificate(der)
	c.caKey = key
	c.CAFile = c.write(t, "ca.pem", "CERTIFICATE", der)
	c.ServerCert, c.ServerKey = c.Issue(t, "server", "sluice-test-server", true)
	return c
}

// Issue writes a certificate for cn signed by the CA, and its key, as
// NAME.pem and NAME-key.pem; server certificates are valid for 127.0.0.1
// and localhost, others for client authentication.
func (c *Certs) Issue(t testing.TB, name, cn string, server bool) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"Sluice tests"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	if err != nil {
		t.Fatalf("brokertest: certificate: %v", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("brokertest: key: %v", err)
	}
	return c.write(t, name+".pem", "CERTIFICATE", der), c.write(t, name+"-key.pem", "PRIVATE KEY", kder)
}

// ClientTLS is a client configuration trusting the CA; with a non-empty
// cn it also presents a client certificate for cn.
func (c *Certs) ClientTLS(t testing.TB, cn string) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(c.ca)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cn != "" {
		cf, kf := c.Issue(t, "client-"+cn, cn, false)
		pair, err := tls.LoadX509KeyPair(cf, kf)
		if err != nil {
			t.Fatalf("brokertest: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

func (c *Certs) write(t testing.TB, name, typ string, der []byte) string {
	path := filepath.Join(c.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("brokertest: key: %v", err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("brokertest: serial: %v", err)
	}
	return n
}
