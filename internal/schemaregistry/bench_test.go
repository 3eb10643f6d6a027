package schemaregistry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/sluicedb/sluice/broker/brokertest"
)

// Benchmarks of the REST API over loopback HTTP against a broker with
// its defaults (--fsync always): registrations (each a new schema in its
// own subject, so each is a durable write), lookups by id and lookups by
// schema (POST /subjects/{s}). Run with -cpu to vary nothing; the client
// count is in the name:
//
//	go test ./internal/schemaregistry -run '^$' -bench . -benchtime 2000x
func BenchmarkRegistry(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("register/clients=%d", clients), func(b *testing.B) {
			e := benchEnv(b)
			var seq atomic.Int64
			e.parallel(b, clients, func(hc *http.Client) error {
				i := seq.Add(1)
				return post(hc, e.srv.URL+fmt.Sprintf("/subjects/bench-%d/versions", i),
					schemaBody("", fmt.Sprintf(`{"type":"record","name":"R%d","fields":[{"name":"f","type":"int"}]}`, i)))
			})
		})
		b.Run(fmt.Sprintf("lookup-id/clients=%d", clients), func(b *testing.B) {
			e := benchEnv(b)
			if err := post(e.srv.Client(), e.srv.URL+"/subjects/s/versions", schemaBody("", avroV1)); err != nil {
				b.Fatal(err)
			}
			e.parallel(b, clients, func(hc *http.Client) error { return get(hc, e.srv.URL+"/schemas/ids/1") })
		})
		b.Run(fmt.Sprintf("lookup-schema/clients=%d", clients), func(b *testing.B) {
			e := benchEnv(b)
			if err := post(e.srv.Client(), e.srv.URL+"/subjects/s/versions", schemaBody("", avroV2)); err != nil {
				b.Fatal(err)
			}
			body := schemaBody("", avroV2)
			e.parallel(b, clients, func(hc *http.Client) error { return post(hc, e.srv.URL+"/subjects/s", body) })
		})
	}
}

func benchEnv(b *testing.B) *env {
	b.Helper()
	br := brokertest.Start(b)
	reg, err := New(context.Background(), Config{Broker: br})
	if err != nil {
		b.Fatal(err)
	}
	e := &env{b: br, reg: reg, srv: httptest.NewServer(reg.Handler())}
	b.Cleanup(e.close)
	return e
}

// parallel runs b.N calls of fn from clients goroutines, each with its
// own keep-alive HTTP client, and reports calls per second.
func (e *env) parallel(b *testing.B, clients int, fn func(*http.Client) error) {
	var left atomic.Int64
	left.Store(int64(b.N))
	errs := make(chan error, clients)
	b.ResetTimer()
	for range clients {
		go func() {
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer hc.CloseIdleConnections()
			for left.Add(-1) >= 0 {
				if err := fn(hc); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

func post(hc *http.Client, url, body string) error {
	resp, err := hc.Post(url, contentType, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("POST %s: %d", url, resp.StatusCode)
	}
	return nil
}

func get(hc *http.Client, url string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return nil
}
