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
//   - v3+ ClientSoftwareName/Version are accepted and not checked; the
//     connection keeps them for client telemetry subscriptions (KIP-714
//     match keys client_software_name/version).
//   - v3+ advertise the feature transaction.version, supported 0-2 and
//     finalized at 2 (KIP-890 part 2), so clients that know it use
//     Produce v12 (implicit partition adds), TxnOffsetCommit v5 and
//     EndTxn v5 (an epoch bump per transaction). Clients that ignore
//     features keep the classic protocol, which stays served.

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// transactionVersion is the transaction.version feature level Sluice
// serves and finalizes.
const transactionVersion = 2

func init() { register(kmsg.ApiVersions.Int16(), 0, 4, handleApiVersions) }

func handleApiVersions(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiKeys()
	if r.c != nil && req.Version >= 3 {
		r.c.softwareName, r.c.softwareVersion = req.ClientSoftwareName, req.ClientSoftwareVersion
	}
	if req.Version >= 3 {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = "transaction.version", 0, transactionVersion
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "transaction.version", transactionVersion, transactionVersion
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		resp.FinalizedFeaturesEpoch = 1
	}
	return resp, nil
}

// softwareFrom keeps the client software name and version of an
// ApiVersions request newer than Sluice serves (answered with every
// supported range, so the client does not ask again): every version from
// 3 on opens its body with them as compact strings.
func (c *conn) softwareFrom(frame []byte) {
	_, rest, err := parseHeader(frame)
	if err == nil {
		rest, err = skipTags(rest)
	}
	if err != nil {
		return
	}
	compact := func() (string, bool) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n == 0 || n-1 > uint64(len(rest)-k) {
			return "", false
		}
		s := string(rest[k : k+int(n-1)])
		rest = rest[k+int(n-1):]
		return s, true
	}
	name, ok1 := compact()
	version, ok2 := compact()
	if ok1 && ok2 {
		c.softwareName, c.softwareVersion = name, version
	}
}
