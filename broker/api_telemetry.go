package broker

// GetTelemetrySubscriptions v0 and PushTelemetry v0 (KIP-714 client
// telemetry; see telemetry.go).
//
// Behaviour:
//   - GetTelemetrySubscriptions: a zero ClientInstanceID gets a new one.
//     The answer is the union of the metrics of the CLIENT_METRICS
//     subscriptions the client matches ([""] when one asks for "*", none
//     when it matches none) at the shortest of their intervals (default
//     300000 ms), compression types zstd, lz4, gzip and snappy, at most
//     1 MiB per push, cumulative sums (DeltaTemporality false). Asking
//     again before the push interval elapsed gets
//     THROTTLING_QUOTA_EXCEEDED, unless the last push failed with
//     UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE.
//   - PushTelemetry: a zero ClientInstanceID or a push after the
//     terminating one gets INVALID_REQUEST; a subscription id that is not
//     the instance's current one (the subscriptions changed)
//     UNKNOWN_SUBSCRIPTION_ID; a push before the interval elapsed (the
//     terminating push excepted) THROTTLING_QUOTA_EXCEEDED; a compression
//     type not offered UNSUPPORTED_COMPRESSION_TYPE; more than 1 MiB
//     TELEMETRY_TOO_LARGE; metrics that do not decompress or decode as
//     OTLP INVALID_RECORD. Accepted metrics are exported on /metrics as
//     sluice_client_telemetry_value (gauges and sums, filtered by the
//     subscription).
//   - No ACL is checked, as in Kafka: any connected client may push.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() {
	register(kmsg.GetTelemetrySubscriptions.Int16(), 0, 0, handleGetTelemetrySubscriptions)
	register(kmsg.PushTelemetry.Int16(), 0, 0, handlePushTelemetry)
}

func handleGetTelemetrySubscriptions(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.GetTelemetrySubscriptionsRequest)
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	r.b.telemetry.subscriptionFor(resp, req.ClientInstanceID, requestAttrs(r))
	return resp, nil
}

func handlePushTelemetry(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.PushTelemetryRequest)
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	resp.ErrorCode = codeOf(r.b.telemetry.push(req, requestAttrs(r)))
	return resp, nil
}
