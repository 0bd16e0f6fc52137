package conformance

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrOutage is the error a Meter's calls fail with during an outage
// (Meter.Outage), unless Meter.Err says otherwise.
var ErrOutage = errors.New("conformance: simulated outage of the cloud API")

// Meter gives a Target Hooks.Writes and Hooks.Outage from one interception
// point of the provider's cloud client, so that a vendor SDK or fake needs
// no wrapper per write method: Call from a hook or middleware that sees
// every cloud call (a mock's per-method hook, a gRPC interceptor, an SDK's
// request handler), or RoundTripper for an SDK that takes an *http.Client.
// SetHooks sets both hooks from it.
//
// A call made during an outage fails with Err and is not counted; any
// other call marked as a write is counted, whether or not the cloud then
// accepts it (LB-CONVERGED and LB-SHARED-POOL-WRITES count what the
// provider attempts). The zero Meter is ready to use and safe for
// concurrent use.
type Meter struct {
	// Err is what a call fails with during an outage: for Call, as
	// returned; for RoundTripper, a 503 response is returned instead and
	// Err is its body. Set it to the error the provider's cloud client
	// returns for a 503, so that the provider takes the outage for an
	// outage. Nil means ErrOutage.
	Err error

	down   atomic.Bool
	writes atomic.Int64
	mu     sync.Mutex
	byOp   map[string]int64
}

// Call is what an interception point calls before each cloud call,
// naming the operation (for Counts) and saying whether it changes the
// cloud. During an outage it returns the outage error, which the caller
// returns instead of making the call; otherwise it counts a write and
// returns nil.
func (m *Meter) Call(op string, write bool) error {
	if m.down.Load() {
		return m.outageErr()
	}
	if write {
		m.writes.Add(1)
		m.mu.Lock()
		if m.byOp == nil {
			m.byOp = map[string]int64{}
		}
		m.byOp[op]++
		m.mu.Unlock()
	}
	return nil
}

// Writes returns how many writes have been counted: Hooks.Writes.
func (m *Meter) Writes() int64 { return m.writes.Load() }

// Counts returns the writes counted so far by operation name, for a
// test's own messages (the rules report Writes only).
func (m *Meter) Counts() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.byOp)
}

// Outage makes every call fail until restore is called: Hooks.Outage.
func (m *Meter) Outage() (restore func()) {
	m.down.Store(true)
	return func() { m.down.Store(false) }
}

// SetHooks sets h.Writes and h.Outage from m.
func (m *Meter) SetHooks(h *Hooks) {
	h.Writes = m.Writes
	h.Outage = m.Outage
}

func (m *Meter) outageErr() error {
	if m.Err != nil {
		return m.Err
	}
	return ErrOutage
}

// RoundTripper returns an http.RoundTripper over next (nil means
// http.DefaultTransport) that meters every request: a request whose
// method is not GET, HEAD or OPTIONS is a write, named "METHOD /path" in
// Counts; during an outage every request is answered 503 Service
// Unavailable without reaching next, as a cloud API's front end answers
// when its back end is down.
func (m *Meter) RoundTripper(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return meteredTransport{m: m, next: next}
}

type meteredTransport struct {
	m    *Meter
	next http.RoundTripper
}

func (t meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	write := req.Method != http.MethodGet && req.Method != http.MethodHead && req.Method != http.MethodOptions
	if err := t.m.Call(req.Method+" "+req.URL.Path, write); err != nil {
		if req.Body != nil {
			req.Body.Close() // RoundTrip must close it, even on failure
		}
		body := fmt.Sprintf("%v\n", err)
		return &http.Response{
			Status:        "503 Service Unavailable",
			StatusCode:    http.StatusServiceUnavailable,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "Retry-After": {"1"}},
			Body:          io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)),
			Request:       req,
		}, nil
	}
	return t.next.RoundTrip(req)
}
