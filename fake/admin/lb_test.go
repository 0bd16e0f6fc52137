package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/admin"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// foreignBody is the body of POST /loadbalancers for a load balancer of
// another cluster, with the instance i-1 behind it.
const foreignBody = `{"name": "other-web", "tags": {"ccmkit.io/cluster": "other", "ccmkit.io/service-uid": "uid-x"},
	"spec": {"ipFamilies": ["IPv4"], "listeners": [{"family": "IPv4", "protocol": "TCP", "port": 443, "nodePort": 30443}],
	"backends": [{"providerID": "fake://i-1"}]}}`

// wantAnswer fails the test unless an admin answer has status, and, for an
// error, a JSON body {"error"} containing message.
func wantAnswer(t *testing.T, what string, code int, body []byte, status int, message string) {
	t.Helper()
	if code != status {
		t.Errorf("%s = %d %s; want %d", what, code, body, status)
		return
	}
	if code < 400 {
		return
	}
	if msg := decode[map[string]string](t, body)["error"]; !strings.Contains(msg, message) {
		t.Errorf("%s: error %q; want it to contain %q", what, msg, message)
	}
}

// TestAdminLoadBalancerEdits drives the load-balancer routes against a
// CCM's cloud keeping instance targets: a load balancer of another cluster
// created, a listener and a backend (by provider ID, escaped in the path)
// removed from the CCM's load balancer, each answer being the load
// balancer as the cloud has it, none counted as a cloud call; DELETE
// /faults drops the CCM's cache, and its next EnsureLoadBalancer repairs
// the drift.
func TestAdminLoadBalancerEdits(t *testing.T) {
	cfg := fake.Config{LoadBalancers: fake.LoadBalancerSection{Backends: fake.BackendsInstanceID}}
	c, base := startAdmin(t, cfg, fake.Options{Instances: []fake.Instance{{Name: "node-a"}, {Name: "node-b"}}})
	code, body, _ := do(t, "POST", base+"/loadbalancers", "", foreignBody)
	wantAnswer(t, "POST /loadbalancers", code, body, http.StatusCreated, "")
	foreign := decode[fake.LoadBalancer](t, body)
	want := fake.LoadBalancer{
		LoadBalancer: loadbalancer.LoadBalancer{
			ID: "lb-1", Name: "other-web", Tags: map[string]string{loadbalancer.TagCluster: "other", loadbalancer.TagServiceUID: "uid-x"},
			Spec: loadbalancer.Spec{
				IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, BackendKey: loadbalancer.BackendKeyProviderID,
				Listeners: []loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 443}, NodePort: 30443}},
				Backends:  []loadbalancer.Backend{{ProviderID: "fake://i-1"}},
			},
			Ingress: []loadbalancer.Ingress{{IP: "198.18.0.1"}},
		},
		VIPs: []string{"198.18.0.1"},
	}
	if diff := cmp.Diff(want, foreign, admin.CmpModel); diff != "" {
		t.Errorf("POST /loadbalancers answered (-want +got):\n%s", diff)
	}

	svc := service("web")
	nodes := []*v1.Node{mustNode(t, c, "i-1"), mustNode(t, c, "i-2")}
	before := ensured(t, c, svc, nodes)
	calls := c.Calls()
	steps := []struct {
		name, reason, path string
		want               func(*fake.LoadBalancer)
	}{
		{
			name: "listener", reason: "the TCP/80 listener goes",
			path: "/loadbalancers/" + before.ID + "/listeners/TCP/80",
			want: func(lb *fake.LoadBalancer) { lb.Spec.Listeners = nil },
		},
		{
			name: "backend", reason: "the key fake://i-2 is sent path-escaped, then escaped as a segment",
			path: "/loadbalancers/" + before.ID + "/backends/fake:%252F%252Fi-2",
			want: func(lb *fake.LoadBalancer) { lb.Spec.Backends = lb.Spec.Backends[:1] },
		},
	}
	drifted := before
	for _, s := range steps {
		code, body, _ := do(t, "DELETE", base+s.path, "", "")
		wantAnswer(t, "DELETE "+s.path, code, body, http.StatusOK, "")
		s.want(&drifted)
		if diff := cmp.Diff(drifted, decode[fake.LoadBalancer](t, body), admin.CmpModel); diff != "" {
			t.Errorf("DELETE %s answered (-want +got), %s:\n%s", s.path, s.reason, diff)
		}
	}
	if diff := cmp.Diff([]fake.LoadBalancer{foreign, drifted}, c.Snapshot().LoadBalancers, admin.CmpModel, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the cloud after the edits (-answered +snapshot):\n%s", diff)
	}
	_, body, _ = do(t, "GET", base+"/calls", "", "")
	if diff := cmp.Diff(calls, decode[fake.Calls](t, body)); diff != "" {
		t.Errorf("GET /calls after the edits (-before +after): the edits are not cloud calls\n%s", diff)
	}
	if code, body, _ := do(t, "DELETE", base+"/faults", "", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE /faults = %d %s", code, body)
	}
	if diff := cmp.Diff(before, ensured(t, c, svc, nodes), admin.CmpModel); diff != "" {
		t.Errorf("EnsureLoadBalancer after DELETE /faults did not repair the drift (-want +got):\n%s", diff)
	}
}

// TestAdminLoadBalancerEditRefusals: what the load-balancer routes refuse,
// with the status and a message naming the problem, changing nothing and
// making no cloud call.
func TestAdminLoadBalancerEditRefusals(t *testing.T) {
	cfg := fake.Config{ClusterID: cluster, LoadBalancers: fake.LoadBalancerSection{IPv4Pool: "192.0.2.0/30", BackendPools: fake.BackendPoolsShared}}
	c, base := startAdmin(t, cfg, fake.Options{Instances: []fake.Instance{{Name: "node-a"}}})
	pooled := ensured(t, c, service("web"), []*v1.Node{mustNode(t, c, "i-1")})
	lb := strings.Replace(foreignBody, `{"providerID": "fake://i-1"}`, `{"nodeName": "node-a"}`, 1)
	if code, body, _ := do(t, "POST", base+"/loadbalancers", "", lb); code != http.StatusCreated {
		t.Fatalf("POST /loadbalancers = %d %s", code, body)
	}
	with := func(old, new string) string { return strings.Replace(lb, old, new, 1) }
	tests := []struct {
		name, reason, method, path, body string
		status                           int
		message                          string
	}{
		{"no free VIP", "a /30 pool has two addresses", "POST", "/loadbalancers", with("other-web", "third"), 409, "address pool exhausted"},
		{"empty body", "the load balancer is the body", "POST", "/loadbalancers", "", 400, "empty body"},
		{"unknown field", "strict decoding", "POST", "/loadbalancers", `{"name": "x", "flavor": "big"}`, 400, `unknown field "flavor" in the body`},
		{"listener key in another case", "the fields of the embedded ListenerKey are checked where the JSON has them", "POST", "/loadbalancers", with(`"family"`, `"Family"`), 400, `unknown field "Family" in the body.spec.listeners[0]: expected one of appProtocol, family, id, nodePort, pool, port, protocol, settings`},
		{"unknown listener field", "strict decoding at depth", "POST", "/loadbalancers", with(`"port": 443`, `"port": 443, "tls": true`), 400, `unknown field "tls" in the body.spec.listeners[0]`},
		{"repeated key", "one value per key", "POST", "/loadbalancers", with(`"name": "other-web"`, `"name": "a", "name": "b"`), 400, `key "name" repeated in the body`},
		{"ID in the body", "the cloud assigns IDs", "POST", "/loadbalancers", with(`"name"`, `"id": "lb-7", "name"`), 400, `loadBalancer.id: Invalid value: "lb-7": expected none`},
		{"ingress in the body", "the cloud reports ingress", "POST", "/loadbalancers", with(`"spec"`, `"ingress": [{"ip": "192.0.2.2"}], "spec"`), 400, "loadBalancer.ingress: Forbidden"},
		{"bad protocol in the body", "TCP, UDP or SCTP", "POST", "/loadbalancers", with(`"TCP"`, `"HTTPS"`), 400, `loadBalancer.spec.listeners[0].protocol: Invalid value: "HTTPS"`},
		{"unknown load balancer", "no such ID", "DELETE", "/loadbalancers/lb-9/listeners/TCP/80", "", 404, `load balancer not found: "lb-9"`},
		{"no such listener", "the error lists those there are", "DELETE", "/loadbalancers/lb-2/listeners/TCP/80", "", 404, "expected one of its listeners: IPv4/TCP/443"},
		{"bad protocol", "TCP, UDP or SCTP", "DELETE", "/loadbalancers/lb-2/listeners/tls/443", "", 400, `listener.protocol: Invalid value: "tls"`},
		{"port not a number", "a port is a number", "DELETE", "/loadbalancers/lb-2/listeners/TCP/https", "", 400, `port "https": expected a number from 1 to 65535`},
		{"port out of range", "1 to 65535", "DELETE", "/loadbalancers/lb-2/listeners/TCP/0", "", 400, "listener.port: Invalid value: 0: expected 1 to 65535"},
		{"body on a DELETE", "a DELETE takes no body", "DELETE", "/loadbalancers/lb-2/listeners/TCP/443", `{"force": true}`, 400, `unknown field "force"`},
		{"GET on a listener", "only DELETE", "GET", "/loadbalancers/lb-2/listeners/TCP/443", "", 405, "expected DELETE"},
		{"unknown load balancer's backend", "no such ID", "DELETE", "/loadbalancers/lb-9/backends/node-a", "", 404, `load balancer not found: "lb-9"`},
		{"no such backend", "the error lists those there are", "DELETE", "/loadbalancers/lb-2/backends/node-z", "", 404, `backend "node-z" (by Node name): expected one of its backends: "node-a"`},
		{"backend in the pool", "the backends of a pooled load balancer are the pool's", "DELETE", "/loadbalancers/" + pooled.ID + "/backends/node-a", "", 404, `it sends traffic to backend pool "` + pooled.Spec.BackendPool + `"`},
		{"key escaped once", "the path holds no percent-encoded '/'", "DELETE", "/loadbalancers/lb-2/backends/fake:%2F%2Fi-1", "", 400, "percent-encoded '/'"},
		{"key not escaped", "a key that does not unescape", "DELETE", "/loadbalancers/lb-2/backends/a%25zz", "", 400, `backend key "a%zz": expected the key path-escaped`},
		{"unknown pool", "no such ID", "DELETE", "/backendpools/bp-9/backends/node-a", "", 404, `backend pool not found: "bp-9"`},
		{"no such member", "the error lists the members", "DELETE", "/backendpools/" + pooled.Spec.BackendPool + "/backends/node-z", "", 404, `expected one of its members: "node-a"`},
	}
	before, calls := c.Snapshot(), c.Calls()
	for _, tt := range tests {
		code, body, _ := do(t, tt.method, base+tt.path, "", tt.body)
		wantAnswer(t, tt.name+": "+tt.method+" "+tt.path+" ("+tt.reason+")", code, body, tt.status, tt.message)
	}
	if diff := cmp.Diff(before, c.Snapshot(), admin.CmpModel); diff != "" {
		t.Errorf("refused edits changed the cloud (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(calls, c.Calls()); diff != "" {
		t.Errorf("refused edits made cloud calls (-before +after):\n%s", diff)
	}
	code, body, _ := do(t, "DELETE", base+"/backendpools/"+pooled.Spec.BackendPool+"/backends/node-a", "", "")
	wantAnswer(t, "DELETE /backendpools/{id}/backends/node-a", code, body, http.StatusOK, "")
	if got := decode[loadbalancer.Pool](t, body); got.ID != pooled.Spec.BackendPool || len(got.Spec.Backends) != 0 {
		t.Errorf("DELETE of the pool's one member answered %s; want the pool without members", body)
	}
}

// TestAdminLoadBalancerEditsWaitForLock: with a shared state file whose
// lock another process holds, the load-balancer routes give up at the
// request's deadline (here: a request whose client has gone) with 503 and
// Retry-After, as every route that works on the cloud does.
func TestAdminLoadBalancerEditsWaitForLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cloud.json")
	c := newCloud(t, fake.Config{StateFile: path, Instances: []fake.Instance{{Name: "node-01"}}})
	lb, err := c.CreateLoadBalancer(consoleLB())
	if err != nil {
		t.Fatal(err)
	}
	h := admin.Handler(c)
	admin.HoldStateLock(t, path)
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/loadbalancers", strings.Replace(foreignBody, `{"providerID": "fake://i-1"}`, `{"nodeName": "node-01"}`, 1)},
		{"DELETE", "/loadbalancers/" + lb.ID + "/listeners/TCP/80", ""},
		{"DELETE", "/loadbalancers/" + lb.ID + "/backends/node-01", ""},
		{"DELETE", "/backendpools/bp-1/backends/node-01", ""},
	} {
		req := httptest.NewRequestWithContext(gone, r.method, "http://127.0.0.1"+r.path, strings.NewReader(r.body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		wantAnswer(t, r.method+" "+r.path+" with the lock held", w.Code, w.Body.Bytes(), http.StatusServiceUnavailable, "waiting for the lock")
		if got := w.Header().Get("Retry-After"); got != "1" {
			t.Errorf("%s %s with the lock held: Retry-After %q; want \"1\"", r.method, r.path, got)
		}
	}
}
