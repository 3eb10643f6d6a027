package schemaregistry

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicedb/sluice/broker/brokertest"
)

// TestMetrics: requests are counted by route pattern and status, and
// the gauges count schemas and live subjects.
func TestMetrics(t *testing.T) {
	b := brokertest.Start(t)
	pr := prometheus.NewRegistry()
	reg, err := New(context.Background(), Config{Broker: b, Registerer: pr})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg.Handler())
	e := &env{b: b, reg: reg, srv: srv}
	t.Cleanup(e.close)
	e.want(t, "POST", "/subjects/a/versions", schemaBody("", avroV1), 200, `{"id":1}`)
	e.want(t, "POST", "/subjects/b/versions", schemaBody("", avroV2), 200, `{"id":2}`)
	e.want(t, "GET", "/subjects/a/versions/9", "", 404, `{"error_code":40402,"message":"Version 9 not found."}`)
	e.want(t, "DELETE", "/subjects/b", "", 200, `[1]`)
	reqs := reg.metrics.requests
	for _, c := range []struct {
		endpoint, status string
		want             float64
	}{
		{"POST /subjects/{subject}/versions", "200", 2},
		{"GET /subjects/{subject}/versions/{version}", "404", 1},
		{"DELETE /subjects/{subject}", "200", 1},
	} {
		if got := testutil.ToFloat64(reqs.WithLabelValues(c.endpoint, c.status)); got != c.want {
			t.Errorf("requests{%s,%s} = %v, want %v", c.endpoint, c.status, got, c.want)
		}
	}
	n, err := testutil.GatherAndCount(pr, "sluice_schema_registry_schemas", "sluice_schema_registry_subjects")
	if err != nil || n != 2 {
		t.Fatalf("gauges: %d series, %v", n, err)
	}
	mfs, _ := pr.Gather()
	for _, mf := range mfs {
		switch mf.GetName() {
		case "sluice_schema_registry_schemas":
			if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 2 {
				t.Errorf("schemas = %v, want 2", v)
			}
		case "sluice_schema_registry_subjects":
			if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 1 {
				t.Errorf("subjects = %v, want 1 (b is soft-deleted)", v)
			}
		}
	}
}
