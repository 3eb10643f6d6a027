package broker

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request is what an Interceptor sees of a Kafka request, before the
// broker serves it.
type Request struct {
	// Key and Version are the request's API key and version
	// (kmsg.Produce.Int16() and so on).
	Key, Version int16
	// ClientID is the client.id of the request header.
	ClientID string
	// Principal is who the request acts as ("User:alice";
	// "User:ANONYMOUS" before a login).
	Principal string
	// Addr is the client's address (host:port), the same for every
	// request of a connection.
	Addr string
	// Kmsg is the decoded request. The interceptor may read it; it must
	// not change it.
	Kmsg kmsg.Request
}

// Action is an Interceptor's decision about one request. The zero
// Action serves the request as usual.
type Action struct {
	// Delay holds the request this long before anything else happens:
	// the connection reads nothing else meanwhile, as with a slow broker.
	Delay time.Duration
	// Drop closes the connection without answering this request (the
	// responses before it are written first).
	Drop bool
	// ErrorCode, when not zero, answers the request with this Kafka
	// error code instead of serving it: nothing is written or read. The
	// answer mirrors the request's topics and partitions (those of the
	// response fields named like the request's) and carries the code in
	// every ErrorCode field.
	ErrorCode int16
	// Response, when set, is sent instead of serving the request (its
	// version is set to the request's).
	Response kmsg.Response
}

// Interceptor decides what happens to each request; it runs on the
// connection's read goroutine, for requests that passed authentication.
type Interceptor func(Request) Action

// Intercept calls f for every request before the broker serves it, for
// fault injection in tests: fail a given API with an error code, delay
// it, or drop the connection (brokertest.Faults builds such rules).
func Intercept(f Interceptor) Opt { return opt(func(c *cfg) { c.intercept = f }) }

var errDropped = errors.New("connection dropped by the interceptor")

// intercept applies the configured Interceptor to a request. It returns
// a response to send instead of serving the request, or an error that
// closes the connection.
func (c *conn) intercept(h reqHeader, req kmsg.Request) (kmsg.Response, error) {
	f := c.b.cfg.intercept
	if f == nil {
		return nil, nil
	}
	a := f(Request{Key: h.key, Version: h.version, ClientID: h.clientID, Principal: c.principal, Addr: c.nc.RemoteAddr().String(), Kmsg: req})
	if a.Delay > 0 {
		if err := sleepCtx(c.b.stopCtx, a.Delay); err != nil {
			return nil, err
		}
	}
	switch {
	case a.Drop:
		return nil, errDropped
	case a.Response != nil:
		a.Response.SetVersion(h.version)
		return a.Response, nil
	case a.ErrorCode != 0:
		return errorResponse(req, a.ErrorCode), nil
	}
	return nil, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errorResponse builds req's response with code in every ErrorCode
// field, its slices mirroring the request's slices of the same name
// (Topics, Partitions, ...) and their identifying fields (Topic,
// Partition, TopicID, Name, ...) copied.
func errorResponse(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	mirror(reflect.ValueOf(req).Elem(), reflect.ValueOf(resp).Elem(), code)
	return resp
}

func mirror(from, to reflect.Value, code int16) {
	for i := 0; i < to.NumField(); i++ {
		f := to.Type().Field(i)
		dst := to.Field(i)
		if !f.IsExported() || !dst.CanSet() {
			continue
		}
		if f.Name == "ErrorCode" && dst.Kind() == reflect.Int16 {
			dst.SetInt(int64(code))
			continue
		}
		if f.Name == "Version" {
			continue
		}
		src := from.FieldByName(f.Name)
		if !src.IsValid() {
			continue
		}
		switch {
		case dst.Kind() == reflect.Slice && src.Kind() == reflect.Slice && dst.Type().Elem().Kind() == reflect.Struct && src.Type().Elem().Kind() == reflect.Struct:
			out := reflect.MakeSlice(dst.Type(), src.Len(), src.Len())
			for j := 0; j < src.Len(); j++ {
				el := out.Index(j)
				if d, ok := el.Addr().Interface().(interface{ Default() }); ok {
					d.Default()
				}
				mirror(src.Index(j), el, code)
			}
			dst.Set(out)
		case dst.Kind() == reflect.Slice && src.Type() == dst.Type() && dst.Type().Elem().Kind() == reflect.Int32:
			dst.Set(src) // partition lists given as numbers
		case src.Type() == dst.Type() && dst.Kind() != reflect.Slice && dst.Kind() != reflect.Struct:
			dst.Set(src) // Topic, Partition, TopicID, Name, Group ...
		}
	}
}
