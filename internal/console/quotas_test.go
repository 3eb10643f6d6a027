package console

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAPIQuotas: /api/v1/quotas lists a quota set with AlterClientQuotas
// and, once the client produced, its account with a measured rate; the
// same account is on /metrics.
func TestAPIQuotas(t *testing.T) {
	e := newEnv(t, envOpt{})
	e.createTopic(t, "q", 1)
	adm := kadm.NewClient(e.client(t))
	name := "loader"
	res, err := adm.AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: &name}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1 << 30}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("AlterClientQuotas: %v %+v", err, res)
	}
	cl := e.client(t, kgo.ClientID(name), kgo.DefaultProduceTopic("q"))
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(strings.Repeat("x", 1000))}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Quotas []struct {
			Entity string             `json:"entity"`
			Values map[string]float64 `json:"values"`
		} `json:"quotas"`
		Usage []struct {
			Quota    string  `json:"quota"`
			ClientID string  `json:"client_id"`
			Limit    float64 `json:"limit"`
			Rate     float64 `json:"rate"`
		} `json:"usage"`
	}
	e.getJSON(t, "/api/v1/quotas", &got)
	if len(got.Quotas) != 1 || got.Quotas[0].Entity != "client-id=loader" || got.Quotas[0].Values["producer_byte_rate"] != 1<<30 {
		t.Fatalf("quotas %+v", got.Quotas)
	}
	if len(got.Usage) != 1 || got.Usage[0].ClientID != "loader" || got.Usage[0].Quota != "producer_byte_rate" || got.Usage[0].Rate <= 0 {
		t.Fatalf("usage %+v", got.Usage)
	}
	_, metrics := e.get(t, "/metrics")
	if !strings.Contains(metrics, `sluice_quota_limit{client_id="loader",quota="producer_byte_rate",user=""} 1.073741824e+09`) {
		t.Fatalf("/metrics lacks the account's limit:\n%s", grepLines(metrics, "sluice_quota"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
