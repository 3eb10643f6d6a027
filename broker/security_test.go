package broker

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFailDelayGrows(t *testing.T) {
	var f authFailures
	now := time.Unix(1000, 0)
	var got []time.Duration
	for i := 0; i < 8; i++ {
		got = append(got, f.failed("10.0.0.1", now, authFailBase))
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", got, want)
		}
	}
	if d := f.failed("10.0.0.2", now, authFailBase); d != authFailBase {
		t.Fatalf("another address starts at %v, want %v", d, authFailBase)
	}
	if d := f.failed("10.0.0.1", now.Add(authFailForget+time.Second), authFailBase); d != authFailBase {
		t.Fatalf("after %v without failures the delay is %v, want %v", authFailForget, d, authFailBase)
	}
}

func TestParseListeners(t *testing.T) {
	ls, err := ParseListeners("PLAINTEXT://127.0.0.1:9092, sasl_ssl://0.0.0.0:9093", "SASL_SSL://broker.example:9093")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[0] != (Listener{Protocol: Plaintext, Addr: "127.0.0.1:9092"}) ||
		ls[1] != (Listener{Protocol: SASLSSL, Addr: "0.0.0.0:9093", Advertise: "broker.example:9093"}) {
		t.Fatalf("ParseListeners = %+v", ls)
	}
	for _, bad := range [][2]string{
		{"", ""}, {"127.0.0.1:9092", ""}, {"HTTP://127.0.0.1:1", ""}, {"SSL://x:1,SSL://y:2", ""},
		{"SSL://127.0.0.1:port", ""}, {"SSL://127.0.0.1:1", "PLAINTEXT://a:1"},
	} {
		if _, err := ParseListeners(bad[0], bad[1]); err == nil {
			t.Errorf("ParseListeners(%q, %q) accepted", bad[0], bad[1])
		}
	}
	if _, err := New(DataDir(t.TempDir()), Listeners(Listener{Protocol: SSL, Addr: "127.0.0.1:0"})); err == nil {
		t.Fatal("an SSL listener without a certificate was accepted")
	}
}

// FuzzSASLHandshake drives a SASL_PLAINTEXT listener with a fuzzed
// SaslHandshake (version and mechanism) and a fuzzed SASL message (a
// SaslAuthenticate request, or a bare token after v0), then a Metadata
// request. Invariants: the broker never answers the Metadata request
// (no exchange can succeed without the password), it closes the
// connection, and it keeps serving.
func FuzzSASLHandshake(f *testing.F) {
	b, err := New(DataDir(f.TempDir()), Listeners(Listener{Protocol: SASLPlaintext, Addr: "127.0.0.1:0"}),
		BootstrapUser("alice", "not-in-the-corpus"), opt(func(c *cfg) { c.authFailBase = time.Microsecond }))
	if err != nil {
		f.Fatal(err)
	}
	if err := b.Start(); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	f.Add(int16(1), "SCRAM-SHA-512", []byte("n,,n=alice,r=abc"))
	f.Add(int16(0), "PLAIN", []byte("\x00alice\x00guess"))
	f.Add(int16(1), "PLAIN", []byte("alice\x00alice\x00"))
	f.Add(int16(1), "GSSAPI", []byte{})
	f.Fuzz(func(t *testing.T, version int16, mech string, msg []byte) {
		nc, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(time.Minute))
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = version&1, mech
		out := frame(hs, 1, "fuzz")
		if version&1 == 0 {
			out = binary.BigEndian.AppendUint32(out, uint32(len(msg)))
			out = append(out, msg...)
		} else {
			au := kmsg.NewPtrSASLAuthenticateRequest()
			au.Version, au.SASLAuthBytes = 1, msg
			out = append(out, frame(au, 2, "fuzz")...)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 1
		out = append(out, frame(md, 99, "fuzz")...)
		nc.Write(out)
		rest, err := io.ReadAll(nc)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the connection was not closed")
		}
		for len(rest) >= 8 {
			n := binary.BigEndian.Uint32(rest)
			if n >= 4 && binary.BigEndian.Uint32(rest[4:]) == 99 {
				t.Fatalf("Metadata was answered without authentication (mechanism %q, message %q)", mech, msg)
			}
			if uint64(n)+4 > uint64(len(rest)) {
				break
			}
			rest = rest[4+n:]
		}
		av := kmsg.NewPtrApiVersionsRequest()
		if resp := dialRaw(t, b.Addr()).roundTrip(av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("broker stopped serving: ApiVersions error %d", resp.ErrorCode)
		}
	})
}
