package broker

// ApiVersions v0-4.
//
// Behaviour:
//   - Answers with every API in the dispatch table and its version range.
//   - The response header is always v0 (no tagged fields), even for the
//     flexible versions 3 and 4, as Kafka does.
//   - A version newer than 4 is answered (in conn.handle) with a v0
//     response carrying UNSUPPORTED_VERSION and the supported ranges, so
//     a client can retry with a version it shares with Sluice.
//   - v3+ ClientSoftwareName/Version are accepted and not checked.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.ApiVersions.Int16(), 0, 4, handleApiVersions) }

func handleApiVersions(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiKeys()
	return resp, nil
}
