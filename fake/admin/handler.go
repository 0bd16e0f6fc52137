package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ccmkit/ccmkit/fake"
	bound "github.com/ccmkit/ccmkit/internal/clip"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// maxBody bounds admin request bodies.
const maxBody = 1 << 20

// Handler returns the admin API of c as an http.Handler, to serve it
// elsewhere than on Config.Admin.Address (Cloud serves it there). It is
// safe for concurrent use. Served elsewhere, it must be reached through a
// loopback name (a port forward, an SSH tunnel), and it sets no server
// timeouts (the http.Server serving it does). Every call it makes on c
// is bound by its request's context.
//
// With admin.address set, the fake serves a small HTTP API on that loopback
// address, from the moment the cloud-controller-manager calls Initialize
// (which it does once it leads, after leader election) until the stop
// channel closes (or Shutdown). It has no authentication, which is why only
// loopback addresses are accepted (AdminHandler serves the same API
// anywhere else). Bodies are JSON; every error is a 4xx or
// 5xx status with the body {"error": "<message>"}.
//
// A web page in a browser on the same machine must not drive it, so it
// refuses, before anything else: a Host header that is not a loopback IP
// address or localhost with the endpoint's port (421; a DNS-rebinding page
// sends its own name); an Origin header other than the endpoint's own
// (http, a loopback host, its port) or a Sec-Fetch-Site other than
// same-origin or none (403); a POST, PUT or DELETE whose Content-Type is not
// application/json (charset=utf-8 allowed), with or without a body (415:
// pages send text/plain, form and multipart bodies, or none, cross-origin
// without a CORS preflight); a path that is not canonical or holds a
// percent-encoded '/' (400). It never sends CORS headers. Bodies are
// decoded strictly: a key repeated in one object at any depth, a field
// spelled in another case, an unknown field or data after the object is a
// 400 naming it. Operations without a body (the instance actions, every
// DELETE, POST /calls/reset) take an empty body or {}. Instance IDs, in a
// body or a path, must not be "." or "..", be longer than 128 bytes, or
// hold '/', '\', '%', '?', '#', white space, control or format characters
// (400). A slow client is cut off: 5s to send
// the headers, 10s for the whole request, 30s to read the response, 1m idle
// between requests on a connection (a body still incomplete at 10s is a
// 408). A request's work on the cloud ends after 20s, or when its client
// goes away: with stateFile, a request that waits that long for the file's
// lock (another process holding it) is a 503 with Retry-After: 1 and
// changes nothing. So curl needs -H 'Content-Type: application/json' for
// every POST, PUT and DELETE.
//
//	GET    /state                     200 State: the whole cloud
//	GET    /instances                 200 [Instance]
//	POST   /instances                 201 Instance; body: Instance (only name required)
//	GET    /instances/{id}            200 Instance
//	DELETE /instances/{id}            204; the instance is forgotten (look-ups: not found)
//	POST   /instances/{id}/stop       200 Instance; running → stopped
//	POST   /instances/{id}/start      200 Instance; stopped → running
//	POST   /instances/{id}/terminate  200 Instance; → terminated (the Node is deleted)
//	GET    /loadbalancers             200 [LoadBalancer]
//	POST   /loadbalancers             201 LoadBalancer; body: loadbalancer.LoadBalancer
//	                                      (name, tags, spec; no id, no ingress), created
//	                                      as in the cloud's console (CreateLoadBalancer)
//	DELETE /loadbalancers/{id}/listeners/{protocol}/{port}
//	                                  200 LoadBalancer; its listeners of that protocol
//	                                      (TCP, UDP, SCTP) and port removed, of every
//	                                      family (RemoveListener)
//	DELETE /loadbalancers/{id}/backends/{key}
//	                                  200 LoadBalancer; its backends of that key removed
//	                                      (RemoveBackend)
//	GET    /backendpools              200 [loadbalancer.Pool]: the shared backend pools
//	                                      ([] unless loadBalancers.backendPools is shared)
//	DELETE /backendpools/{id}/backends/{key}
//	                                  200 loadbalancer.Pool; its members of that key
//	                                      removed (RemoveBackendPoolMember)
//	GET    /routes                    200 [Route]; ?cluster=NAME keeps one cluster's
//	GET    /calls                     200 Calls: cloud API calls so far, throttled ones too
//	POST   /calls/reset               204; counters back to zero
//	POST   /faults                    204; body {"op": "ApplyLoadBalancer", "times": 2,
//	                                      "error": "boom", "retryAfter": "5s",
//	                                      "lostResponse": false}
//	DELETE /faults                    204; every injected fault removed
//	GET    /ratelimit                 200 RateLimit in force
//	PUT    /ratelimit                 200 RateLimit; body: RateLimit, replacing it ({}: no limit)
//	GET    /provisioning              200 {"delay": "2s"}: delay of the next load balancers
//	PUT    /provisioning              200 {"delay"}; body {"delay": "5s"} ("0s": none)
//
// Statuses: 400 for a body that is not valid JSON, has unknown fields or
// invalid values, and for a load balancer, listener or backend key the
// cloud refuses (naming the field, the value and what was expected); 404
// for an unknown path, instance, load balancer, backend pool, or a listener
// or backend the load balancer (or pool) does not have (the message lists
// those it has); 405 for a wrong method; 409 for starting or stopping a
// terminated instance, adding an existing ID, or adding an instance or a
// load balancer when its network or VIP pool has no free address;
// 413 for a body over 1 MiB; 415 for a Content-Type other than
// application/json; 403 and 421 as above; 500 for a state file that cannot
// be read; 503 for a state file whose lock was not free in time. In POST
// /faults, "op" is one of the Op constants ("" means every operation),
// "times" is how many calls fail (-1: every call until DELETE /faults),
// "retryAfter" (a Go duration) makes the fault a throttle (an
// api.RetryError), "error" is the message, and "lostResponse" makes a
// failing write take effect before it fails (the cloud changes, the
// caller sees an error). Faults are matched in the order they were added;
// each failing call consumes one use of the first matching fault; they are
// built on interceptor Funcs, in front of the Cloud's own. PUT /ratelimit
// and PUT /provisioning change the rate limit and the provisioning delay
// (400 for a value they reject, naming it): the body of
// PUT /ratelimit is the whole limit, without the realistic defaults, and
// every bucket starts full; a new delay applies to load balancers created
// afterwards.
//
// The load-balancer routes change the cloud as a user in its console
// would, behind the cloud-controller-manager's back (see
// CreateLoadBalancer): they are not cloud API calls (GET /calls does not
// count them, faults and the rate limit do not apply), and the CCM is not
// told: it sees the change at its first list of load balancers after
// loadBalancerCacheTTL, or after DELETE /faults drops its cache. A
// backend's {key} is what the cloud keeps of it (the load balancer's
// spec.backendKey): the Node name, or with loadBalancers.backends
// instanceID the provider ID. It is path-escaped (url.PathEscape), then
// escaped again as a path segment, since a percent-encoded '/' in the path
// is refused: the backend fake://i-3 is
// /loadbalancers/lb-1/backends/fake:%252F%252Fi-3 (a Node name needs no
// escaping). A load balancer that sends traffic to a shared backend pool
// (spec.backendPool) has its backends in the pool: remove them there.
//
// JSON shapes (field names as in the json tags of the Go types):
//
//	Instance     {"id", "name", "zone", "region", "type", "internalIPs": [], "externalIPs": [],
//	              "hostname", "labels": {}, "state": "running|stopped|terminated"}
//	LoadBalancer {"id", "name", "tags": {}, "spec": {...}, "ingress": [...]: loadbalancer.LoadBalancer,
//	              "vips": [], "provisioning": true (only while provisioning),
//	              "readyAt": RFC 3339 (only with a delay),
//	              "busyUntil": RFC 3339 (only once a write made it busy, loadBalancers.busyAfterWrite)};
//	             on a hierarchical cloud its spec has "listenerPools": true and each listener
//	             its "id" and "pool": {"id", "backends": [], "healthCheck"} (absent: no pool yet)
//	loadbalancer.LoadBalancer (POST /loadbalancers)
//	             {"name", "tags": {}, "spec": {"ipFamilies": ["IPv4"], "requestedIPs": [],
//	              "listeners": [{"family", "protocol", "port", "nodePort"}],
//	              "backends": [{"nodeName", "providerID", "ipv4", "ipv6"}], "backendPool",
//	              "healthCheck": {"protocol": "HTTP", "port", "path"}, "sourceRanges": [],
//	              "sessionAffinity": {"clientIP", "timeoutSeconds"}, "settings": {}}}
//	Route        {"cluster", "name", "destinationCIDR", "targetNode", "targetNodeAddresses": []}
//	State        {"clusterID", "instances": [], "loadBalancers": [], "routes": [],
//	              "pools": [{"purpose", "cidr", "allocated"}]}
//	Calls        {"reads", "writes", "faults", "throttled", "byOp": {"<Op>": n},
//	              "throttledByOp": {"<Op>": n} (only once a call was throttled),
//	              "busy", "busyByOp": {"<Op>": n} (only once a write was refused as busy)}
//	RateLimit    {"readsPerSecond", "writesPerSecond", "burst"} (an absent rate: unlimited)
//
// With loadBalancers.backends instanceID a backend has only "providerID";
// a provisioning load balancer has no "ingress".
func Handler(c *fake.Cloud) http.Handler {
	return adminGuard{next: api{c}.mux(), deadline: timeoutsOf().handler}
}

// adminGuard refuses the requests a web page could make to the admin API
// before they reach it, and bounds the others by deadline.
type adminGuard struct {
	next     http.Handler
	deadline time.Duration
}

func (g adminGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if status, msg := refuseRequest(r); status != 0 {
		writeError(w, status, msg)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.deadline)
	defer cancel()
	g.next.ServeHTTP(w, r.WithContext(ctx))
}

// refuseRequest returns the status and message refusing r, or 0: the
// checks against web pages (DNS rebinding, cross-origin requests, simple
// requests that need no CORS preflight) and against paths the mux would
// clean or unescape.
func refuseRequest(r *http.Request) (int, string) {
	port := "" // unknown: any port
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			port = p
		}
	}
	want := "a loopback address or localhost"
	if port != "" {
		want += " with port " + port
	}
	if !isLoopbackHostPort(r.Host, port) {
		return http.StatusMisdirectedRequest, fmt.Sprintf("Host %s: expected %s (the admin endpoint answers no other name, against DNS rebinding)", clip(r.Host), want)
	}
	if origins := r.Header.Values("Origin"); len(origins) > 0 {
		if len(origins) > 1 || !isEndpointOrigin(origins[0], port) {
			return http.StatusForbidden, fmt.Sprintf("Origin %s: expected none, or the endpoint's own (http:// and %s); the admin endpoint serves no web page and refuses requests from one", clip(strings.Join(origins, ", ")), want)
		}
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return http.StatusForbidden, fmt.Sprintf("Sec-Fetch-Site %s: expected same-origin or none; the admin endpoint refuses requests from web pages", clip(site))
	}
	if p := r.URL.Path; r.URL.RawPath != "" || p == "" || p != path.Clean(p) {
		return http.StatusBadRequest, fmt.Sprintf("path %s: expected a canonical path without percent-encoded '/', '.' or '..' segments, repeated or trailing '/'", clip(r.URL.EscapedPath()))
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		cts := r.Header.Values("Content-Type")
		if len(cts) != 1 || !isJSONMediaType(cts[0]) {
			return http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %s: expected application/json on every %s, with or without a body (a web page cannot send it cross-origin without a preflight)", clip(strings.Join(cts, ", ")), r.Method)
		}
	}
	return 0, ""
}

// isLoopbackHostPort reports whether hostport (a Host header or the host
// of an Origin) is a loopback IP address or localhost, with port when port
// is not empty (no port in hostport means 80).
func isLoopbackHostPort(hostport, port string) bool {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		host, p = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), "80"
	}
	if port != "" && p != port {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Zone() == "" && a.Unmap().IsLoopback()
}

// isEndpointOrigin reports whether origin (an Origin header) is the admin
// endpoint itself: http, a loopback host and the endpoint's port.
func isEndpointOrigin(origin, port string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && u.User == nil && u.Path == "" && u.RawQuery == "" && u.Fragment == "" &&
		!u.ForceQuery && u.Host != "" && isLoopbackHostPort(u.Host, port)
}

// isJSONMediaType reports whether ct is application/json, with no
// parameter but charset=utf-8.
func isJSONMediaType(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}

// clip quotes s for an error message, cut to clip.MaxQuoted bytes with
// its length (clip.Quoted): the one bound of every value ccmkit quotes,
// the fake's own messages included.
func clip(s string) string { return strconv.Quote(bound.Quoted(s)) }

// pathID returns the {id} of r's path, or writes 400 and returns false
// when it is not a safe instance ID.
func pathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if err := fake.CheckInstanceID(id); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("instance ID %s: %v", clip(id), err))
		return "", false
	}
	return id, true
}

// methods dispatches on the request method and answers 405 otherwise.
type methods map[string]http.HandlerFunc

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := m[r.Method]; h != nil {
		h(w, r)
		return
	}
	allowed := strings.Join(slices.Sorted(maps.Keys(m)), ", ")
	w.Header().Set("Allow", allowed)
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: expected %s", r.Method, r.URL.Path, allowed))
}

// decodeBody decodes the JSON object of r's body into v, strictly (see
// strictJSON); on failure it writes the error response and returns false.
// The Content-Type was checked by adminGuard.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool { return decode(w, r, v, false) }

// emptyBody checks that r's body, which the operation does not use, is
// empty or {}; on failure it writes the error response and returns false.
func emptyBody(w http.ResponseWriter, r *http.Request) bool { return decode(w, r, &struct{}{}, true) }

func decode(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxBody))
		return false
	case err != nil:
		writeError(w, http.StatusRequestTimeout, "reading the body: "+err.Error())
		return false
	case len(bytes.TrimSpace(data)) == 0 && emptyOK:
		return true
	case len(bytes.TrimSpace(data)) == 0:
		writeError(w, http.StatusBadRequest, "empty body: expected a JSON object")
		return false
	}
	if err := strictJSON(data, v); err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON body: "+err.Error())
		return false
	}
	return true
}

// writeControlError maps a control-surface error to its status, by its
// kind: a wait for the state file's lock that outlived the request's
// deadline (or its client) is 503 with Retry-After; invalid input 400; an
// instance, load balancer, listener, backend or backend pool that does not
// exist 404 (the message lists those there are); an ID taken, a terminated
// instance, an exhausted address pool 409; any other error (a state file
// that cannot be read) 500.
func writeControlError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	case errors.Is(err, fake.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, fake.ErrNotFound), errors.Is(err, loadbalancer.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, fake.ErrConflict):
		status = http.StatusConflict
	}
	writeError(w, status, err.Error())
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// strictJSON decodes data, one JSON value, into v (a pointer): unknown
// fields, trailing data and wrong types are errors (json.Decoder with
// DisallowUnknownFields), and so, before any decoding, is a key repeated in
// one object at any depth, or a key that names a field of v's structs in
// another case (encoding/json would take the last, or match it
// case-insensitively). Errors name the key and where it is.
func strictJSON(data []byte, v any) error {
	kc := keyChecker{dec: json.NewDecoder(bytes.NewReader(data))}
	if err := kc.value(reflect.TypeOf(v), "the body"); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON object: expected the body to be one JSON object")
	}
	return nil
}

// keyChecker walks the tokens of one JSON value alongside the Go type it
// decodes into (nil: any), checking the keys of every object.
type keyChecker struct{ dec *json.Decoder }

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// value checks the next value, of type t, found at where.
func (kc keyChecker) value(t reflect.Type, where string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(jsonUnmarshaler)) {
		t = nil // decoded by its own rules: keys are checked for repeats only
	}
	tok, err := kc.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return kc.object(t, where)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; kc.dec.More(); i++ {
			if err := kc.value(elem, fmt.Sprintf("%s[%d]", where, i)); err != nil {
				return err
			}
		}
		_, err := kc.dec.Token() // ]
		return err
	}
	return nil
}

// object checks the keys of the object whose '{' was just read.
func (kc keyChecker) object(t reflect.Type, where string) error {
	var fields map[string]reflect.Type // a struct's fields by JSON name
	var elem reflect.Type              // a map's values
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fields = jsonFields(t)
	case t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	seen := map[string]bool{}
	for kc.dec.More() {
		tok, err := kc.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("key %s repeated in %s: expected each key once", clip(key), where)
		}
		seen[key] = true
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				return fmt.Errorf("unknown field %s in %s: expected one of %s (as spelled)", clip(key), where, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
			}
			elem = ft
		}
		if err := kc.value(elem, where+"."+key); err != nil {
			return err
		}
	}
	_, err := kc.dec.Token() // }
	return err
}

// jsonFields returns the fields encoding/json decodes into a struct, by
// their JSON names: its exported fields, and the fields of an embedded
// struct without a JSON name (loadbalancer.Listener's ListenerKey), a
// field of the outer struct winning over one of the same name inside, as
// encoding/json has it.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var embedded []reflect.Type
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case name == "-":
		case f.Anonymous && name == "" && ft.Kind() == reflect.Struct:
			embedded = append(embedded, ft)
		case !f.IsExported():
		case name == "":
			out[f.Name] = f.Type
		default:
			out[name] = f.Type
		}
	}
	for _, e := range embedded {
		for name, ft := range jsonFields(e) {
			if _, ok := out[name]; !ok {
				out[name] = ft
			}
		}
	}
	return out
}
