package broker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage"
)

// request is one decoded request on its way through a handler.
type request struct {
	ctx      context.Context // cancelled when the broker closes
	b        *Broker
	clientID string // client.id from the request header ("" when null)
	host     string // the client's remote host
	kreq     kmsg.Request
	c        *conn // the connection; its SASL state is the read loop's (SASL handlers run there)
	// principal is who the request acts as, for the authorizer.
	principal string
	// internal is set for InternalConn's connections: ACLs do not apply.
	internal bool
	// closeAfter, set by a handler, closes the connection once its
	// response is written (a failed authentication).
	closeAfter error
	// waited is the time a Fetch spent waiting for records (not counted
	// against request_percentage).
	waited time.Duration
	// throttle is a controller-mutation throttle a handler met
	// (quotas.go), answered and applied by dispatch.
	throttle time.Duration
	// frame is a Produce's request frame, and shared the hold on it
	// that handleProduce hands to the appends (storage.Shared), which
	// dispatch passes on to the pending reply.
	frame  []byte
	shared *storage.Shared
}

// handler serves one API. It returns the response to write, or nil to
// write none (Produce with acks=0). An error closes the connection (a
// request that cannot be answered in Kafka's terms).
type handler func(r *request) (kmsg.Response, error)

type apiEntry struct {
	key      int16
	min, max int16
	h        handler
}

// apis is the dispatch table, filled by init functions in the api_*.go
// files (one file per API). It is read-only once init has finished.
var apis = map[int16]apiEntry{}

// register adds an API to the dispatch table. It panics on a duplicate
// key or a range kmsg cannot encode (a programming error).
func register(key int16, minV, maxV int16, h handler) {
	if _, dup := apis[key]; dup {
		panic(fmt.Sprintf("broker: API key %d registered twice", key))
	}
	req := kmsg.RequestForKey(key)
	if req == nil || minV < 0 || minV > maxV || maxV > req.MaxVersion() {
		panic(fmt.Sprintf("broker: bad registration of API key %d v%d-%d", key, minV, maxV))
	}
	apis[key] = apiEntry{key: key, min: minV, max: maxV, h: h}
}

// apiKeys lists the registered APIs in key order, for ApiVersions.
func apiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]int16, 0, len(apis))
	for k := range apis {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(keys))
	for _, k := range keys {
		e := apis[k]
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: e.min, MaxVersion: e.max})
	}
	return out
}
