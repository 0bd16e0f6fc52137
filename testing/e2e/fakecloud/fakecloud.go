package fakecloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/statefile"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// WriteConfig writes cfg as the YAML --cloud-config file at path, after
// checking it with the fake's own validation (fake.Config.Validate), so a
// bad config fails here rather than as a CCM that exits at start-up.
func WriteConfig(path string, cfg fake.Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("fakecloud: invalid cloud-config for %s: %w", path, err)
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("fakecloud: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("fakecloud: %w", err)
	}
	return nil
}

// Zones are the zones Instances spreads instances over, in turn.
var Zones = []string{"zone-a", "zone-b", "zone-c"}

// Instances returns n running instances named <prefix>-1 ... <prefix>-n,
// with IDs i-<prefix>-<k>, zones taken in turn from Zones, the default
// region and instance type, and InternalIPs left to the fake's allocator.
func Instances(prefix string, n int) []fake.Instance {
	out := make([]fake.Instance, n)
	for i := range out {
		out[i] = fake.Instance{
			ID:   fmt.Sprintf("i-%s-%d", prefix, i+1),
			Name: fmt.Sprintf("%s-%d", prefix, i+1),
			Zone: Zones[i%len(Zones)],
		}
	}
	return out
}

// Admin is a client of the fake's admin endpoint. It is safe for concurrent
// use. Every method returns an *APIError for a non-2xx answer.
type Admin struct {
	base   string
	client *http.Client
}

// NewAdmin returns a client for the admin endpoint at addr ("host:port").
func NewAdmin(addr string) *Admin {
	return &Admin{base: "http://" + addr, client: &http.Client{Timeout: 10 * time.Second}}
}

// WaitAdmin waits until the fake has written its admin address to
// addressFile (fake.AdminSection.AddressFile) and the endpoint answers, then
// returns a client for it. The fake starts the endpoint when the CCM
// initializes the cloud, which a CCM with leader election does only once it
// leads: so this also waits for leadership. exited, when non-nil, is polled
// so that a CCM that dies is reported at once.
func WaitAdmin(ctx context.Context, addressFile string, exited func() error) (*Admin, error) {
	var last error
	for {
		b, err := os.ReadFile(addressFile)
		addr := strings.TrimSpace(string(b))
		switch {
		case err != nil:
			last = err
		case addr == "":
			last = errors.New("address file is empty")
		default:
			if _, _, err := net.SplitHostPort(addr); err != nil {
				last = fmt.Errorf("address file holds %q: %w", addr, err)
				break
			}
			a := NewAdmin(addr)
			if _, err := a.Calls(ctx); err != nil {
				last = err
				break
			}
			return a, nil
		}
		if exited != nil {
			if err := exited(); err != nil {
				return nil, fmt.Errorf("fakecloud: waiting for the admin endpoint in %s: %w", addressFile, err)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("fakecloud: waiting for the admin endpoint in %s: %w (last: %v)", addressFile, ctx.Err(), last) //nolint:errorlint // the error is ctx's; the last attempt's is context for the reader, kept out of errors.Is and errors.As
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Address returns the "host:port" the client talks to.
func (a *Admin) Address() string { return strings.TrimPrefix(a.base, "http://") }

// APIError is a non-2xx answer of the admin endpoint.
type APIError struct {
	Method, Path string
	StatusCode   int
	// Message is the "error" field of the body (or the raw body).
	Message string
}

// Error implements error: method, path, status and message.
func (e *APIError) Error() string {
	return fmt.Sprintf("fakecloud: %s %s: %d %s", e.Method, e.Path, e.StatusCode, e.Message)
}

func (a *Admin) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("fakecloud: %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return fmt.Errorf("fakecloud: %w", err)
	}
	if body != nil || method != http.MethodGet {
		// The endpoint refuses a state-changing request that is not JSON,
		// with or without a body: it is what a web page could send.
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("fakecloud: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("fakecloud: %s %s: reading body: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return &APIError{Method: method, Path: path, StatusCode: resp.StatusCode, Message: msg}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("fakecloud: %s %s: decoding %q: %w", method, path, b, err)
		}
	}
	return nil
}

// State returns the whole cloud (GET /state).
func (a *Admin) State(ctx context.Context) (fake.State, error) {
	var s fake.State
	err := a.do(ctx, http.MethodGet, "/state", nil, &s)
	return s, err
}

// Instances returns every instance (GET /instances).
func (a *Admin) Instances(ctx context.Context) ([]fake.Instance, error) {
	var out []fake.Instance
	err := a.do(ctx, http.MethodGet, "/instances", nil, &out)
	return out, err
}

// Instance returns one instance (GET /instances/{id}).
func (a *Admin) Instance(ctx context.Context, id string) (fake.Instance, error) {
	var out fake.Instance
	err := a.do(ctx, http.MethodGet, "/instances/"+url.PathEscape(id), nil, &out)
	return out, err
}

// AddInstance adds an instance (POST /instances) and returns it with the
// fake's defaults filled in.
func (a *Admin) AddInstance(ctx context.Context, in fake.Instance) (fake.Instance, error) {
	var out fake.Instance
	err := a.do(ctx, http.MethodPost, "/instances", in, &out)
	return out, err
}

// DeleteInstance forgets an instance (DELETE /instances/{id}).
func (a *Admin) DeleteInstance(ctx context.Context, id string) error {
	return a.do(ctx, http.MethodDelete, "/instances/"+url.PathEscape(id), nil, nil)
}

// StopInstance stops a running instance (POST /instances/{id}/stop).
func (a *Admin) StopInstance(ctx context.Context, id string) (fake.Instance, error) {
	return a.instanceAction(ctx, id, "stop")
}

// StartInstance starts a stopped instance (POST /instances/{id}/start).
func (a *Admin) StartInstance(ctx context.Context, id string) (fake.Instance, error) {
	return a.instanceAction(ctx, id, "start")
}

// TerminateInstance terminates an instance (POST /instances/{id}/terminate).
func (a *Admin) TerminateInstance(ctx context.Context, id string) (fake.Instance, error) {
	return a.instanceAction(ctx, id, "terminate")
}

func (a *Admin) instanceAction(ctx context.Context, id, action string) (fake.Instance, error) {
	var out fake.Instance
	err := a.do(ctx, http.MethodPost, "/instances/"+url.PathEscape(id)+"/"+action, nil, &out)
	return out, err
}

// LoadBalancers returns every load balancer (GET /loadbalancers).
func (a *Admin) LoadBalancers(ctx context.Context) ([]fake.LoadBalancer, error) {
	var out []fake.LoadBalancer
	err := a.do(ctx, http.MethodGet, "/loadbalancers", nil, &out)
	return out, err
}

// CreateLoadBalancer creates a load balancer behind the CCM's back, as a
// user in the cloud's console would (POST /loadbalancers; see
// fake.Cloud.CreateLoadBalancer): lb's Name, Tags and Spec, without ID or
// Ingress, which the cloud assigns. Tag it with another cluster's
// loadbalancer.TagCluster, or with no ccmkit tag, to check that the CCM
// leaves it alone. It returns the load balancer as the fake keeps it, with
// its ID and VIPs; an *APIError 400 names a field the fake refuses.
func (a *Admin) CreateLoadBalancer(ctx context.Context, lb loadbalancer.LoadBalancer) (fake.LoadBalancer, error) {
	return a.loadBalancer(ctx, http.MethodPost, "/loadbalancers", lb)
}

// RemoveListener removes the listeners of load balancer id with protocol
// and port, of every IP family, behind the CCM's back (DELETE
// /loadbalancers/{id}/listeners/{protocol}/{port}), and returns the load
// balancer as the fake keeps it. The CCM sees the change at its first
// list after its load-balancer cache's TTL, or after ClearFaults drops the
// cache. An unknown id or listener is an *APIError 404.
func (a *Admin) RemoveListener(ctx context.Context, id string, protocol v1.Protocol, port int32) (fake.LoadBalancer, error) {
	path := fmt.Sprintf("/loadbalancers/%s/listeners/%s/%d", url.PathEscape(id), url.PathEscape(string(protocol)), port)
	return a.loadBalancer(ctx, http.MethodDelete, path, nil)
}

// RemoveBackend removes the backends of load balancer id whose key is key
// behind the CCM's back (DELETE /loadbalancers/{id}/backends/{key}), and
// returns the load balancer as the fake keeps it. The key is what the fake
// keeps of a backend: the Node name, or with loadBalancers.backends
// instanceID the provider ID ("fake://<instance ID>"; escaped here as the
// endpoint requires). The CCM sees the change as for RemoveListener. An
// unknown id or key is an *APIError 404; for a load balancer served from
// a shared backend pool the message names the pool.
func (a *Admin) RemoveBackend(ctx context.Context, id, key string) (fake.LoadBalancer, error) {
	// The key is path-escaped, then escaped again as a path segment: the
	// endpoint refuses a percent-encoded '/' in the path itself.
	path := "/loadbalancers/" + url.PathEscape(id) + "/backends/" + url.PathEscape(url.PathEscape(key))
	return a.loadBalancer(ctx, http.MethodDelete, path, nil)
}

// loadBalancer sends a request whose answer is a load balancer.
func (a *Admin) loadBalancer(ctx context.Context, method, path string, body any) (fake.LoadBalancer, error) {
	var out fake.LoadBalancer
	err := a.do(ctx, method, path, body, &out)
	return out, err
}

// Routes returns the routes of one cluster, or of every cluster when
// cluster is empty (GET /routes?cluster=). A route belongs to the cluster ID
// of the fake that made it (fake.Config.ClusterID), or to the CCM's
// --cluster-name when that fake has none.
func (a *Admin) Routes(ctx context.Context, cluster string) ([]fake.Route, error) {
	path := "/routes"
	if cluster != "" {
		path += "?cluster=" + url.QueryEscape(cluster)
	}
	var out []fake.Route
	err := a.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// Calls returns the cloud API call counters (GET /calls).
func (a *Admin) Calls(ctx context.Context) (fake.Calls, error) {
	var out fake.Calls
	err := a.do(ctx, http.MethodGet, "/calls", nil, &out)
	return out, err
}

// RateLimit returns the rate limit in force (GET /ratelimit).
func (a *Admin) RateLimit(ctx context.Context) (fake.RateLimit, error) {
	var out fake.RateLimit
	err := a.do(ctx, http.MethodGet, "/ratelimit", nil, &out)
	return out, err
}

// ResetCalls sets the counters back to zero (POST /calls/reset).
func (a *Admin) ResetCalls(ctx context.Context) error {
	return a.do(ctx, http.MethodPost, "/calls/reset", nil, nil)
}

// FaultRequest is the body of POST /faults (see the fake package's admin
// endpoint documentation).
type FaultRequest struct {
	// Op is a fake.Op; "" means every operation.
	Op fake.Op `json:"op"`
	// Times is how many calls fail; -1 means every call until ClearFaults.
	Times int `json:"times"`
	// Error is the message of the injected error.
	Error string `json:"error,omitempty"`
	// RetryAfter, a Go duration, makes the fault a throttle.
	RetryAfter string `json:"retryAfter,omitempty"`
	// LostResponse makes a failing write take effect before it fails: the
	// cloud changes, the CCM sees an error.
	LostResponse bool `json:"lostResponse,omitempty"`
}

// InjectFault adds a scripted fault (POST /faults).
func (a *Admin) InjectFault(ctx context.Context, f FaultRequest) error {
	return a.do(ctx, http.MethodPost, "/faults", f, nil)
}

// ClearFaults removes every injected fault (DELETE /faults).
func (a *Admin) ClearFaults(ctx context.Context) error {
	return a.do(ctx, http.MethodDelete, "/faults", nil, nil)
}

// Shared is this process's view of a fake cloud kept in a state file
// (fake.Config.StateFile): the cloud that every CCM started with that file
// runs against, read and changed from outside them. It outlives the CCMs,
// as a real cloud does. It is safe for concurrent use.
type Shared struct {
	// Cloud is the fake, built from the same cloud-config; its control
	// surface (Snapshot, AddInstance, LoadBalancerFor, ...) and its
	// cloudprovider.Interface act on the shared cloud.
	Cloud *fake.Cloud
}

// OpenShared opens the shared cloud of cfg.StateFile, creating the file
// from cfg's seeded instances if no CCM did yet. cfg must be the CCMs'
// cloud-config (its pools must match the file's); its admin endpoint is
// dropped. The view holds two open files (the lock and the state file)
// until it is garbage collected.
func OpenShared(cfg fake.Config) (*Shared, error) {
	if cfg.StateFile == "" {
		return nil, errors.New("fakecloud: OpenShared: cloud-config without stateFile; expected the path of the shared state file")
	}
	cfg.Admin = fake.AdminSection{}
	f, err := statefile.Open(cfg.StateFile)
	if err != nil {
		return nil, fmt.Errorf("fakecloud: %w", err)
	}
	c, err := fake.New(cfg, fake.Options{Persistence: f})
	if err != nil {
		return nil, fmt.Errorf("fakecloud: %w", err)
	}
	return &Shared{Cloud: c}, nil
}

// LoadBalancers returns every load balancer of the shared cloud, as
// Admin.LoadBalancers does for one CCM's endpoint.
func (s *Shared) LoadBalancers(context.Context) ([]fake.LoadBalancer, error) {
	return s.Cloud.Snapshot().LoadBalancers, nil
}

// State returns the whole shared cloud (fake.Cloud.Snapshot: when the
// state file cannot be read, the state last loaded, and the error logged).
func (s *Shared) State(context.Context) (fake.State, error) { return s.Cloud.Snapshot(), nil }
