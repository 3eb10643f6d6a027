package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"math/big"
	"net"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

// TestSoloProduceInlineOnlyWithoutPipelining checks the gate of the lone
// producer's path (conn.soloProduce): acks=all requests sent one at a
// time on a connection are written, fsynced and answered on its read
// loop, while requests pipelined on it are not (each would then wait
// for an fsync of its own, the read loop reading nothing meanwhile),
// and both get their offsets in order.
func TestSoloProduceInlineOnlyWithoutPipelining(t *testing.T) {
	tb := startTest(t)
	c := dialRaw(t, tb.addr)
	testSoloProduce(t, tb, c, c.send)
}

// TestSoloProduceInlineOverTLS is the same gate over TLS, where
// crypto/tls reads records ahead into buffers of its own: requests sent
// one at a time are synced on the read loop, and requests pipelined in
// TLS records of their own that reach the broker in one piece (the
// broker's first read takes them all; crypto/tls hands over one record
// at a time) are not.
func TestSoloProduceInlineOverTLS(t *testing.T) {
	cert := selfSigned(t)
	tb := startTest(t, Listeners(Listener{Protocol: SSL, Addr: "127.0.0.1:0"}), TLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}))
	nc, err := net.Dial("tcp", tb.b.ListenerAddr(SSL))
	if err != nil {
		t.Fatal(err)
	}
	hold := &holdConn{Conn: nc}
	tc := tls.Client(hold, &tls.Config{InsecureSkipVerify: true}) // the test's own certificate
	t.Cleanup(func() { tc.Close() })
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	c := &rawConn{t: t, nc: tc}
	testSoloProduce(t, tb, c, func(b []byte) {
		// One TLS record per request, all in one write to the socket.
		hold.holding = true
		for len(b) > 0 {
			n := 4 + int(binary.BigEndian.Uint32(b))
			if _, err := tc.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
		if err := hold.flush(); err != nil {
			t.Fatal(err)
		}
	})
}

// holdConn keeps what is written while holding is set, until flush.
type holdConn struct {
	net.Conn
	holding bool
	held    []byte
}

func (h *holdConn) Write(b []byte) (int, error) {
	if h.holding {
		h.held = append(h.held, b...)
		return len(b), nil
	}
	return h.Conn.Write(b)
}

func (h *holdConn) flush() error {
	h.holding = false
	_, err := h.Conn.Write(h.held)
	h.held = nil
	return err
}

// selfSigned returns a throwaway certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "solo-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func testSoloProduce(t *testing.T, tb *testBroker, c *rawConn, sendPiped func([]byte)) {
	const topic = "solo"
	if err := tb.b.CreateTopic(t.Context(), topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	synced := func() int {
		t.Helper()
		var d dto.Metric
		if err := tb.b.accM.InlineSynced.Write(&d); err != nil {
			t.Fatal(err)
		}
		return int(d.GetCounter().GetValue())
	}
	next := int64(0)
	const serial = 40
	for i := range serial {
		p := produceOne(c, topic, storagetest.MakeBatch(1, 100, int64(1000+i)))
		if p.ErrorCode != 0 || p.BaseOffset != next {
			t.Fatalf("produce %d: code %d offset %d, want offset %d", i, p.ErrorCode, p.BaseOffset, next)
		}
		next++
	}
	// The first quietProduces requests open the gate, and the
	// partition's first writes go through the WAL until it writes alone;
	// an append that finds the partition's goroutine busy (writing zeros
	// ahead) is queued. Most of the rest are synced inline.
	alone := synced()
	if alone < serial/2 {
		t.Fatalf("%d of %d requests sent one at a time were fsynced on the read loop", alone, serial)
	}

	// Now pipelined: maxInFlight requests in one write. The first is
	// read with the others buffered behind it, and every later one while
	// earlier responses are owed: none is synced inline (at most the
	// first, had its bytes arrived alone).
	const piped = maxInFlight
	var out []byte
	for i := range piped {
		out = append(out, frame(produceReq(topic, -1, storagetest.MakeBatch(1, 100, int64(2000+i))), int32(100+i), "solo")...)
	}
	sendPiped(out)
	for i := range piped {
		corr, body, err := c.readFrame()
		if err != nil {
			t.Fatalf("pipelined response %d: %v", i, err)
		}
		if corr != int32(100+i) {
			t.Fatalf("pipelined response %d has correlation id %d: out of order", i, corr)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		if err := resp.ReadFrom(body[1:]); err != nil {
			t.Fatal(err)
		}
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != next {
			t.Fatalf("pipelined produce %d: code %d offset %d, want offset %d", i, p.ErrorCode, p.BaseOffset, next)
		}
		next++
	}
	if got := synced() - alone; got > 1 {
		t.Fatalf("%d of %d pipelined requests were fsynced on the read loop", got, piped)
	}
	if l := latestOffset(c, topic); l != next {
		t.Fatalf("log end %d, want %d", l, next)
	}
}
