package admin_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/admin"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/clip"
)

// noContentType is the contentType of do that sends no Content-Type.
const noContentType = "-"

// do sends a request and returns the status, the body and the response.
// An empty contentType is application/json for every method but GET (the
// admin endpoint requires it), noContentType none.
func do(t *testing.T, method, url, contentType, body string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType == "" && method != http.MethodGet {
		contentType = "application/json"
	}
	if contentType != "" && contentType != noContentType {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data, resp.Header
}

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	return v
}

func TestAdminOffByDefault(t *testing.T) {
	c := newAdmin(t, fake.Config{})
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(nil, stop)
	if addr, err := admin.AdminAddr(c); addr != "" || err != nil {
		t.Errorf("AdminAddr() without admin.address = %q, %v; want \"\", nil", addr, err)
	}
}

func TestAdminRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8089", "[::]:8089", ":8089", "192.0.2.1:8089", "example.com:80", "127.0.0.1:99999"} {
		_, err := fake.New(fake.Config{Admin: fake.AdminSection{Address: addr}}, fake.Options{})
		if err == nil || !strings.Contains(err.Error(), "admin.address") {
			t.Errorf("New with admin.address %q = %v; want an error naming admin.address", addr, err)
		}
		_, err = admin.New(newCloud(t, fake.Config{}), admin.Options{AdminSection: fake.AdminSection{Address: addr}})
		if err == nil || !strings.Contains(err.Error(), "Options.Address") {
			t.Errorf("admin.New with Address %q = %v; want an error naming Options.Address", addr, err)
		}
	}
}

func TestAdminLifecycle(t *testing.T) {
	file := filepath.Join(t.TempDir(), "admin-addr")
	c := newAdmin(t, fake.Config{Admin: fake.AdminSection{Address: "localhost:0", AddressFile: file}})
	if addr, _ := admin.AdminAddr(c); addr != "" {
		t.Fatalf("AdminAddr() before Initialize = %q; New must start nothing", addr)
	}
	stop := make(chan struct{})
	c.Initialize(nil, stop)
	addr, err := admin.AdminAddr(c)
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := net.SplitHostPort(addr)
	if host != "127.0.0.1" {
		t.Errorf("listening on %q; want 127.0.0.1 only", addr)
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != addr {
		t.Errorf("address file = %q, %v; want %q", data, err, addr)
	}
	if code, _, _ := do(t, "GET", "http://"+addr+"/state", "", ""); code != http.StatusOK {
		t.Errorf("GET /state = %d; want 200", code)
	}
	close(stop)
	c.Shutdown() // waits for the endpoint to stop
	if conn, err := net.Dial("tcp", addr); err == nil {
		conn.Close()
		t.Errorf("the admin endpoint still accepts connections after stop")
	}
}

func TestAdminListenFailureIsReported(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := newAdmin(t, fake.Config{Admin: fake.AdminSection{Address: ln.Addr().String()}})
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(nil, stop)
	if addr, err := admin.AdminAddr(c); addr != "" || err == nil {
		t.Errorf("AdminAddr() with the port taken = %q, %v; want an error", addr, err)
	}
	if _, ok := c.LoadBalancer(); !ok {
		t.Error("the cloud must work without its admin endpoint")
	}
}

func TestAdminAPI(t *testing.T) {
	c, base := startAdmin(t, fake.Config{ClusterID: "demo"}, fake.Options{Instances: []fake.Instance{{Name: "node-a"}}})
	v2 := instancesOf(t, c)

	code, body, _ := do(t, "POST", base+"/instances", "application/json", `{"name": "node-x", "zone": "zone-z"}`)
	if code != http.StatusCreated {
		t.Fatalf("POST /instances = %d %s; want 201", code, body)
	}
	added := decode[fake.Instance](t, body)
	if added.ID != "i-2" || added.Zone != "zone-z" || added.State != instances.StateRunning || len(added.InternalIPs) != 1 {
		t.Errorf("added instance = %+v; want i-2 in zone-z, running, with an address", added)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-x"}}
	if meta, err := v2.InstanceMetadata(t.Context(), node); err != nil || meta.ProviderID != "fake://i-2" {
		t.Errorf("InstanceMetadata of the added instance = %+v, %v; want fake://i-2 (the cache must see it)", meta, err)
	}

	for _, step := range []struct {
		action   string
		state    instances.State
		exists   bool
		shutdown bool
	}{
		{"stop", instances.StateStopped, true, true},
		{"start", instances.StateRunning, true, false},
		{"terminate", instances.StateTerminated, false, false},
	} {
		code, body, _ := do(t, "POST", base+"/instances/i-2/"+step.action, "", "")
		if code != http.StatusOK || decode[fake.Instance](t, body).State != step.state {
			t.Fatalf("POST /instances/i-2/%s = %d %s; want 200 and state %s", step.action, code, body, step.state)
		}
		exists, err := v2.InstanceExists(t.Context(), node)
		if err != nil || exists != step.exists {
			t.Errorf("after %s: InstanceExists = %v, %v; want %v", step.action, exists, err, step.exists)
		}
		if exists {
			if shut, _ := v2.InstanceShutdown(t.Context(), node); shut != step.shutdown {
				t.Errorf("after %s: InstanceShutdown = %v; want %v", step.action, shut, step.shutdown)
			}
		}
	}

	code, body, _ = do(t, "GET", base+"/instances/i-1", "", "")
	if code != http.StatusOK || decode[fake.Instance](t, body).Name != "node-a" {
		t.Errorf("GET /instances/i-1 = %d %s", code, body)
	}
	if code, body, _ := do(t, "DELETE", base+"/instances/i-2", "", ""); code != http.StatusNoContent {
		t.Errorf("DELETE /instances/i-2 = %d %s; want 204", code, body)
	}
	if code, _, _ := do(t, "GET", base+"/instances/i-2", "", ""); code != http.StatusNotFound {
		t.Errorf("GET of a removed instance = %d; want 404", code)
	}

	nodeA := mustNode(t, c, "i-1")
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("web"), []*v1.Node{nodeA}); err != nil {
		t.Fatal(err)
	}
	code, body, _ = do(t, "GET", base+"/loadbalancers", "", "")
	lbs := decode[[]fake.LoadBalancer](t, body)
	if code != http.StatusOK || len(lbs) != 1 || len(lbs[0].VIPs) != 1 || lbs[0].Spec.Backends[0].NodeName != "node-a" {
		t.Errorf("GET /loadbalancers = %d %s; want one load balancer with node-a behind it", code, body)
	}

	if err := c.AddRoute(fake.Route{Cluster: "other", Name: "r", DestinationCIDR: "10.244.0.0/24", TargetNode: "node-a"}); err != nil {
		t.Fatal(err)
	}
	_, body, _ = do(t, "GET", base+"/routes?cluster=other", "", "")
	if rs := decode[[]fake.Route](t, body); len(rs) != 1 {
		t.Errorf("GET /routes?cluster=other = %s; want one route", body)
	}
	_, body, _ = do(t, "GET", base+"/routes?cluster="+cluster, "", "")
	if rs := decode[[]fake.Route](t, body); len(rs) != 0 {
		t.Errorf("GET /routes?cluster=%s = %s; want none", cluster, body)
	}

	_, body, _ = do(t, "GET", base+"/state", "", "")
	st := decode[fake.State](t, body)
	if diff := cmp.Diff(c.Snapshot(), st, admin.CmpModel); diff != "" {
		t.Errorf("GET /state differs from Snapshot (-Snapshot +GET):\n%s", diff)
	}

	_, body, _ = do(t, "GET", base+"/calls", "", "")
	if calls := decode[fake.Calls](t, body); calls.Writes != 1 || calls.ByOp[fake.OpApplyLoadBalancer] != 1 {
		t.Errorf("GET /calls = %s; want the create counted", body)
	}
	if code, _, _ := do(t, "POST", base+"/calls/reset", "", ""); code != http.StatusNoContent || c.Calls().Reads != 0 {
		t.Errorf("POST /calls/reset = %d, calls %+v; want 204 and zero", code, c.Calls())
	}

	code, body, _ = do(t, "POST", base+"/faults", "application/json", `{"op": "FindLoadBalancers", "times": 1, "retryAfter": "7s"}`)
	if code != http.StatusNoContent {
		t.Fatalf("POST /faults = %d %s; want 204", code, body)
	}
	// A new Service: its look-up is a cloud call (the load-balancer cache
	// answers web's from its list, with no call a fault could fail).
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("api"), []*v1.Node{nodeA}); err == nil || !strings.Contains(err.Error(), "retry after 7s") {
		t.Errorf("Ensure after a throttle fault = %v; want a RetryError", err)
	}
	if code, body, _ := do(t, "POST", base+"/faults", "application/json", `{"times": -1, "error": "cloud down"}`); code != http.StatusNoContent {
		t.Fatalf("POST /faults (outage) = %d %s; want 204", code, body)
	}
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("api"), []*v1.Node{nodeA}); !errors.Is(err, fake.ErrInjected) || !strings.Contains(err.Error(), "cloud down") {
		t.Errorf("Ensure during an outage = %v; want the injected error", err)
	}
	if code, _, _ := do(t, "DELETE", base+"/faults", "", ""); code != http.StatusNoContent {
		t.Errorf("DELETE /faults = %d; want 204", code)
	}
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("web"), []*v1.Node{nodeA}); err != nil {
		t.Errorf("Ensure after DELETE /faults: %v", err)
	}
	if code, body, _ := do(t, "POST", base+"/faults", "application/json", `{"op": "DeleteLoadBalancer", "times": 1, "error": "reset", "lostResponse": true}`); code != http.StatusNoContent {
		t.Fatalf("POST /faults (lost response) = %d %s; want 204", code, body)
	}
	if err := lbOf(t, c).EnsureLoadBalancerDeleted(t.Context(), cluster, service("web")); !errors.Is(err, fake.ErrInjected) {
		t.Errorf("EnsureLoadBalancerDeleted with a lost response = %v; want the injected error", err)
	}
	if _, ok := c.LoadBalancerFor(cluster, service("web")); ok {
		t.Error("the load balancer survived a delete whose response was lost; want it deleted")
	}
}

func TestAdminRejectsMalformedRequests(t *testing.T) {
	c, base := startAdmin(t, fake.Config{}, fake.Options{Instances: []fake.Instance{{Name: "node-a", ID: "i-1"}, {Name: "node-t", ID: "i-t", State: instances.StateTerminated}}})
	longID := strings.Repeat("i", 1000)
	tests := []struct {
		name, method, path, contentType, body string
		reason                                string
		status                                int
		message                               string
	}{
		{"not json", "POST", "/instances", "application/json", `{"name": `, "a truncated body", 400, "malformed JSON"},
		{"unknown field", "POST", "/instances", "", `{"name": "n", "flavor": "x"}`, "strict decoding", 400, `unknown field "flavor"`},
		{"empty body", "POST", "/instances", "", ``, "an object is required", 400, "empty body"},
		{"trailing data", "POST", "/instances", "", `{"name": "n"} {}`, "one object, which the error says", 400, "data after the JSON object: expected the body to be one JSON object"},
		{"wrong type", "POST", "/instances", "", `{"name": 7}`, "types are checked", 400, "malformed JSON"},
		{"invalid instance", "POST", "/instances", "", `{"name": "Not_A_Node"}`, "fields are validated", 400, "instance.name"},
		{"missing name", "POST", "/instances", "", `{"zone": "z"}`, "the name is required", 400, "instance.name"},
		{"taken id", "POST", "/instances", "", `{"name": "n", "id": "i-1"}`, "IDs are unique", 409, "already exists"},
		{"content type", "POST", "/instances", "text/plain", `{"name": "n"}`, "JSON only", 415, "application/json"},
		{"too large", "POST", "/instances", "", `{"name": "` + strings.Repeat("a", 2<<20) + `"}`, "bodies are bounded", 413, "larger than"},
		{"method", "DELETE", "/state", "", "", "state is read-only", 405, "expected GET"},
		{"method on action", "GET", "/instances/i-1/stop", "", "", "actions are POST", 405, "expected POST"},
		{"unknown path", "GET", "/nope", "", "", "no such resource", 404, "no such path"},
		{"unknown action", "POST", "/instances/i-1/reboot", "", "", "three actions", 404, "reboot"},
		{"long instance id", "POST", "/instances/" + longID + "/stop", "", "", "the ID is quoted cut to the one bound, clip.MaxQuoted", 400, "instance ID " + strconv.Quote(clip.Quoted(longID))},
		{"unknown instance", "POST", "/instances/i-404/stop", "", "", "no such instance", 404, "i-404"},
		{"start terminated", "POST", "/instances/i-t/start", "", "", "terminated is final", 409, "terminated"},
		{"bad fault op", "POST", "/faults", "", `{"op": "Reboot", "times": 1}`, "ops are checked", 400, `op "Reboot"`},
		{"bad fault times", "POST", "/faults", "", `{"times": 0}`, "times is required", 400, "times 0"},
		{"bad retryAfter", "POST", "/faults", "", `{"times": 1, "retryAfter": "soon"}`, "a Go duration", 400, "retryAfter"},
		{"zero rate", "PUT", "/ratelimit", "", `{"readsPerSecond": 0, "burst": 1}`, "a rate is positive", 400, "readsPerSecond"},
		{"rate without burst", "PUT", "/ratelimit", "", `{"writesPerSecond": 3}`, "a bucket holds a call", 400, "burst"},
		{"unknown rate field", "PUT", "/ratelimit", "", `{"qps": 3}`, "strict decoding", 400, `unknown field "qps"`},
		{"rate limit method", "POST", "/ratelimit", "", `{}`, "GET or PUT", 405, "expected GET, PUT"},
		{"negative delay", "PUT", "/provisioning", "", `{"delay": "-2s"}`, "time does not run backwards", 400, "-2s"},
		{"delay without unit", "PUT", "/provisioning", "", `{"delay": "2"}`, "a duration has a unit; the error names the field", 400, `delay: duration "2": expected a number with a unit`},
		{"delay not a duration", "PUT", "/provisioning", "", `{"delay": "soon"}`, "the field, the value and what was expected", 400, `delay: duration "soon": expected`},
		{"delay not a string", "PUT", "/provisioning", "", `{"delay": 5}`, "a duration is a string", 400, "delay: "},
		{"null delay", "PUT", "/provisioning", "", `{"delay": null}`, "null is no duration", 400, `delay: expected a duration such as "2s"`},
		{"missing delay", "PUT", "/provisioning", "", `{}`, "the delay is required", 400, "delay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, header := do(t, tt.method, base+tt.path, tt.contentType, tt.body)
			if code != tt.status {
				t.Errorf("%s %s = %d %s; want %d (%s)", tt.method, tt.path, code, body, tt.status, tt.reason)
			}
			if ct := header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q; want application/json", ct)
			}
			msg := decode[map[string]string](t, body)["error"]
			if !strings.Contains(msg, tt.message) {
				t.Errorf("error message %q; want it to contain %q", msg, tt.message)
			}
			if code == http.StatusMethodNotAllowed && header.Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
		})
	}
	if n := len(c.Snapshot().Instances); n != 2 {
		t.Errorf("%d instances after rejected requests; want 2", n)
	}
	if st, _ := c.InstanceByID("i-1"); st.State != instances.StateRunning {
		t.Errorf("i-1 is %s; want running", st.State)
	}
}

// TestAdminRateLimitAndProvisioning: the rate limit and the provisioning
// delay are read and replaced at run time, and GET /calls shows the calls
// the limit throttled.
func TestAdminRateLimitAndProvisioning(t *testing.T) {
	clk, withClock := newClock()
	cfg := fake.Config{Realistic: true, Instances: []fake.Instance{{Name: "node-a"}}}
	c, base := startAdmin(t, cfg, withClock)
	code, body, _ := do(t, "GET", base+"/ratelimit", "", "")
	want := fake.RateLimit{ReadsPerSecond: ptr.To(20.0), WritesPerSecond: ptr.To(10.0), Burst: 20} // realistic mode (fake.Config.Realistic)
	if diff := cmp.Diff(want, decode[fake.RateLimit](t, body), admin.CmpModel); code != http.StatusOK || diff != "" {
		t.Errorf("GET /ratelimit = %d (-want +got):\n%s", code, diff)
	}
	code, body, _ = do(t, "GET", base+"/provisioning", "", "")
	if code != http.StatusOK || string(body) != `{"delay":"2s"}`+"\n" {
		t.Errorf("GET /provisioning = %d %s; want 200 {\"delay\":\"2s\"}", code, body)
	}

	code, body, _ = do(t, "PUT", base+"/provisioning", "application/json", `{"delay": "0s"}`)
	if code != http.StatusOK || string(body) != `{"delay":"0s"}`+"\n" || c.ProvisioningDelay() != 0 {
		t.Errorf("PUT /provisioning 0s = %d %s, delay %v; want 200 and no delay", code, body, c.ProvisioningDelay())
	}
	nodes := []*v1.Node{mustNode(t, c, "i-1")}
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("web"), nodes); err != nil {
		t.Errorf("EnsureLoadBalancer without a delay: %v", err)
	}
	if code, body, _ := do(t, "PUT", base+"/provisioning", "", `{"delay": "1m"}`); code != http.StatusOK {
		t.Errorf("PUT /provisioning 1m = %d %s; want 200", code, body)
	}
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("late"), nodes); err == nil {
		t.Errorf("EnsureLoadBalancer after PUT /provisioning 1m = nil; want the load balancer provisioning")
	}
	_, body, _ = do(t, "GET", base+"/loadbalancers", "", "")
	lbs := decode[[]fake.LoadBalancer](t, body)
	if len(lbs) != 2 || lbs[0].Provisioning || !lbs[1].Provisioning || !lbs[1].ReadyAt.Equal(epoch.Add(time.Minute)) {
		t.Errorf("GET /loadbalancers = %s; want the first ready, the second provisioning until %v", body, epoch.Add(time.Minute))
	}

	code, body, _ = do(t, "PUT", base+"/ratelimit", "application/json", `{"writesPerSecond": 0.5, "burst": 1}`)
	limit := fake.RateLimit{WritesPerSecond: ptr.To(0.5), Burst: 1}
	if diff := cmp.Diff(limit, decode[fake.RateLimit](t, body), admin.CmpModel); code != http.StatusOK || diff != "" {
		t.Errorf("PUT /ratelimit = %d (-want +got):\n%s", code, diff)
	}
	if diff := cmp.Diff(limit, c.RateLimit(), admin.CmpModel); diff != "" {
		t.Errorf("RateLimit() after PUT /ratelimit (-want +got):\n%s", diff)
	}
	do(t, "POST", base+"/calls/reset", "", "")
	for _, name := range []string{"one", "two"} {
		_, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service(name), nodes)
		if name == "two" && !isRetry(err) {
			t.Errorf("second create after PUT /ratelimit with a burst of 1 = %v; want throttled", err)
		}
	}
	_, body, _ = do(t, "GET", base+"/calls", "", "")
	calls := decode[fake.Calls](t, body)
	if calls.Throttled != 1 || calls.ThrottledByOp[fake.OpApplyLoadBalancer] != 1 {
		t.Errorf("GET /calls = %s; want one throttled ApplyLoadBalancer", body)
	}
	clk.Step(2 * time.Second)
	if code, body, _ := do(t, "PUT", base+"/ratelimit", "", `{}`); code != http.StatusOK || string(body) != "{}\n" {
		t.Errorf("PUT /ratelimit {} = %d %s; want 200 {} (no limit)", code, body)
	}
}
