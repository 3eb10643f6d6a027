package console

import (
	"net/http"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiQuotas is GET /api/v1/quotas: the configured client quotas and the
// accounts in use (measured rate, throttle handed out). It needs
// DESCRIBE_CONFIGS on the cluster, as DescribeClientQuotas does.
func (s *Server) apiQuotas(w http.ResponseWriter, r *http.Request) {
	if err := s.need(r, kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeCluster, clusterName); err != nil {
		s.fail(w, r, err)
		return
	}
	entries, usage := s.b.ClientQuotas()
	writeJSON(w, http.StatusOK, map[string]any{"quotas": entries, "usage": usage})
}
