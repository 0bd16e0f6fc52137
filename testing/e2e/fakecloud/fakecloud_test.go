package fakecloud_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/admin"
	"github.com/ccmkit/ccmkit/fake/statefile"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
)

// startCloud runs a fake cloud in this process with its admin endpoint on
// a free loopback port (and over its state file, if any), as the CCM
// would after Initialize, and returns it
// with a client from WaitAdmin.
func startCloud(t *testing.T, cfg fake.Config) (*fake.Cloud, *fakecloud.Admin) {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "admin.addr")
	cfg.Admin = fake.AdminSection{Address: "127.0.0.1:0", AddressFile: addrFile}
	var opts fake.Options
	if cfg.StateFile != "" {
		f, err := statefile.Open(cfg.StateFile)
		if err != nil {
			t.Fatal(err)
		}
		opts.Persistence = f
	}
	c, err := fake.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	served, err := admin.New(c, admin.Options{AdminSection: cfg.Admin})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	served.Initialize(nil, stop)
	t.Cleanup(func() { close(stop); served.Shutdown() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	client, err := fakecloud.WaitAdmin(ctx, addrFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, client
}

func TestWriteConfigRoundTrip(t *testing.T) {
	cfg := fake.Config{
		ClusterID:     "c1",
		InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"},
		Instances:     fakecloud.Instances("n", 4),
		Admin:         fake.AdminSection{Address: "127.0.0.1:0", AddressFile: "/tmp/x"},
	}
	path := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := fakecloud.WriteConfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The file must decode with the fake's own strict decoder, as the CCM
	// decodes --cloud-config.
	got, err := provider.DecodeConfig[fake.Config](f)
	if err != nil {
		t.Fatalf("the fake's decoder rejects what WriteConfig wrote: %v", err)
	}
	if diff := cmp.Diff(cfg, *got); diff != "" {
		t.Errorf("round trip (-written +decoded):\n%s", diff)
	}
	if zones := []string{got.Instances[0].Zone, got.Instances[1].Zone, got.Instances[2].Zone, got.Instances[3].Zone}; !cmp.Equal(zones, []string{"zone-a", "zone-b", "zone-c", "zone-a"}) {
		t.Errorf("Instances zones = %v, want them spread over %v in turn", zones, fakecloud.Zones)
	}
}

func TestWriteConfigRejectsInvalid(t *testing.T) {
	err := fakecloud.WriteConfig(filepath.Join(t.TempDir(), "c.yaml"), fake.Config{Instances: []fake.Instance{{Name: "Not_A_Node"}}})
	if err == nil || !strings.Contains(err.Error(), "instances[0].name") {
		t.Errorf("WriteConfig with an invalid instance name: err = %v, want one naming instances[0].name", err)
	}
}

// TestAdmin drives every method of the client against a real fake cloud and
// checks each change in the cloud's own snapshot.
func TestAdmin(t *testing.T) {
	ctx := t.Context()
	cloud, admin := startCloud(t, fake.Config{ClusterID: "c1", Instances: fakecloud.Instances("n", 2)})

	st, err := admin.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cloud.Snapshot(), st, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("State() differs from the cloud's snapshot (-cloud +admin):\n%s", diff)
	}
	ins, err := admin.Instances(ctx)
	if err != nil || len(ins) != 2 {
		t.Fatalf("Instances() = %v, %v; want the 2 seeded", ins, err)
	}

	steps := []struct {
		name   string
		reason string
		do     func() (fake.Instance, error)
		id     string
		want   instances.State
	}{
		{"stop", "POST /instances/{id}/stop stops", func() (fake.Instance, error) { return admin.StopInstance(ctx, "i-n-1") }, "i-n-1", instances.StateStopped},
		{"start", "POST /instances/{id}/start starts", func() (fake.Instance, error) { return admin.StartInstance(ctx, "i-n-1") }, "i-n-1", instances.StateRunning},
		{"terminate", "POST /instances/{id}/terminate terminates", func() (fake.Instance, error) { return admin.TerminateInstance(ctx, "i-n-2") }, "i-n-2", instances.StateTerminated},
		{"add", "POST /instances adds with defaults", func() (fake.Instance, error) { return admin.AddInstance(ctx, fake.Instance{ID: "i-new", Name: "new"}) }, "i-new", instances.StateRunning},
	}
	for _, s := range steps {
		got, err := s.do()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got.ID != s.id || got.State != s.want {
			t.Errorf("%s: %s: returned %v, want %s %s", s.name, s.reason, got, s.id, s.want)
		}
		if in, ok := cloud.InstanceByID(s.id); !ok || in.State != s.want {
			t.Errorf("%s: %s: the cloud has %v (found %v), want state %s", s.name, s.reason, in, ok, s.want)
		}
		if one, err := admin.Instance(ctx, s.id); err != nil || one.State != s.want {
			t.Errorf("%s: Instance(%s) = %v, %v; want state %s", s.name, s.id, one, err, s.want)
		}
	}
	if err := admin.DeleteInstance(ctx, "i-new"); err != nil {
		t.Fatal(err)
	}
	if _, ok := cloud.InstanceByID("i-new"); ok {
		t.Error("DeleteInstance: the cloud still knows i-new")
	}

	// Errors come back as *APIError with the status and the message.
	_, err = admin.StartInstance(ctx, "i-n-2")
	var apiErr *fakecloud.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || apiErr.Message == "" {
		t.Errorf("starting a terminated instance: err = %#v, want an *APIError 409 with a message", err)
	}
	_, err = admin.Instance(ctx, "i-nope")
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown instance: err = %v, want an *APIError 404", err)
	}

	// Faults and counters.
	if err := admin.InjectFault(ctx, fakecloud.FaultRequest{Op: fake.OpListInstances, Times: 1, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	if err := admin.InjectFault(ctx, fakecloud.FaultRequest{Op: "NoSuchOp", Times: 1}); err == nil || !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Errorf("a fault for an unknown op: err = %v, want an *APIError 400", err)
	}
	if err := admin.ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admin.ResetCalls(ctx); err != nil {
		t.Fatal(err)
	}
	calls, err := admin.Calls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Reads != 0 || calls.Writes != 0 {
		t.Errorf("Calls() after ResetCalls = %+v, want zero", calls)
	}
	lbs, err := admin.LoadBalancers(ctx)
	if err != nil || len(lbs) != 0 {
		t.Errorf("LoadBalancers() = %v, %v; want none", lbs, err)
	}
	if err := cloud.AddRoute(fake.Route{Cluster: "c1", Name: "r1", DestinationCIDR: "10.244.1.0/24", TargetNode: "n-1"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		cluster string
		want    int
	}{{"c1", 1}, {"other", 0}, {"", 1}} {
		routes, err := admin.Routes(ctx, tt.cluster)
		if err != nil || len(routes) != tt.want {
			t.Errorf("Routes(%q) = %v, %v; want %d", tt.cluster, routes, err, tt.want)
		}
	}
}

func TestWaitAdminReportsExit(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := fakecloud.WaitAdmin(ctx, filepath.Join(t.TempDir(), "never"), func() error { return errors.New("ccm exited") })
	if err == nil || !strings.Contains(err.Error(), "ccm exited") {
		t.Errorf("WaitAdmin with a dead CCM: err = %v, want the exit reported", err)
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel2()
	_, err = fakecloud.WaitAdmin(ctx2, filepath.Join(t.TempDir(), "never"), nil)
	if err == nil || !strings.Contains(err.Error(), "waiting for the admin endpoint") {
		t.Errorf("WaitAdmin timing out: err = %v, want a timeout naming the wait", err)
	}
}

// TestShared: a CCM's cloud (here in this process, with its admin
// endpoint) and a Shared view on the same state file are one cloud: what
// is changed through either is seen through the other, and the view does
// not seed the instances again. The lost-response fault of the admin API
// creates a load balancer although the call fails.
func TestShared(t *testing.T) {
	cfg := fake.Config{Instances: fakecloud.Instances("s", 2), StateFile: filepath.Join(t.TempDir(), "cloud.json")}
	cloud, admin := startCloud(t, cfg)
	view, err := fakecloud.OpenShared(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := view.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Instances) != 2 {
		t.Errorf("the view sees %d instances; want the 2 the CCM's cloud seeded, not seeded again", len(st.Instances))
	}
	if _, err := view.Cloud.StopInstance("i-s-1"); err != nil {
		t.Fatal(err)
	}
	if in, err := admin.Instance(t.Context(), "i-s-1"); err != nil || in.State != instances.StateStopped {
		t.Errorf("GET /instances/i-s-1 after the view stopped it = %+v, %v; want stopped", in, err)
	}

	if err := admin.InjectFault(t.Context(), fakecloud.FaultRequest{Op: fake.OpApplyLoadBalancer, Times: 1, Error: "reset", LostResponse: true}); err != nil {
		t.Fatal(err)
	}
	lb, _ := cloud.LoadBalancer()
	node, err := cloud.NodeFor("i-s-2")
	if err != nil {
		t.Fatal(err)
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}},
	}
	if _, err := lb.EnsureLoadBalancer(t.Context(), "c", svc, []*v1.Node{node}); err == nil || !strings.Contains(err.Error(), "reset") {
		t.Errorf("EnsureLoadBalancer with a lost response = %v; want the injected error", err)
	}
	lbs, err := view.LoadBalancers(t.Context())
	if err != nil || len(lbs) != 1 {
		t.Errorf("the view's load balancers = %v, %v; want the one created although its response was lost", lbs, err)
	}

	if _, err := fakecloud.OpenShared(fake.Config{}); err == nil || !strings.Contains(err.Error(), "stateFile") {
		t.Errorf("OpenShared without stateFile = %v; want an error naming stateFile", err)
	}
}

// TestAdminLoadBalancerEdits: the client's load-balancer edits against a
// fake keeping instance targets: a load balancer of another cluster
// seeded, a listener and a backend (by provider ID, which the client
// escapes) removed from the CCM's load balancer behind its back, none
// counted as a cloud call, errors as *APIError with the status; once its
// cache is dropped, the CCM repairs the drift.
func TestAdminLoadBalancerEdits(t *testing.T) {
	ctx := t.Context()
	cloud, admin := startCloud(t, fake.Config{ClusterID: "c1", Instances: fakecloud.Instances("n", 2), LoadBalancers: fake.LoadBalancerSection{Backends: fake.BackendsInstanceID}})
	equate := cmp.Options{cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}), cmpopts.EquateEmpty()}

	foreign, err := admin.CreateLoadBalancer(ctx, loadbalancer.LoadBalancer{
		Name: "other-web",
		Tags: map[string]string{loadbalancer.TagCluster: "other", loadbalancer.TagServiceUID: "uid-other"},
		Spec: loadbalancer.Spec{
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Listeners:  []loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 443}}},
			Backends:   []loadbalancer.Backend{{ProviderID: "fake://i-n-1"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if foreign.ID == "" || len(foreign.VIPs) != 1 || foreign.Tags[loadbalancer.TagCluster] != "other" {
		t.Errorf("CreateLoadBalancer = %+v; want an ID, a VIP and the other cluster's tag", foreign)
	}

	lb, _ := cloud.LoadBalancer()
	var nodes []*v1.Node
	for _, id := range []string{"i-n-1", "i-n-2"} {
		node, err := cloud.NodeFor(id)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, node)
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}},
	}
	if _, err := lb.EnsureLoadBalancer(ctx, "c", svc, nodes); err != nil {
		t.Fatal(err)
	}
	want, _ := cloud.LoadBalancerFor("c", svc)
	calls, err := admin.Calls(ctx)
	if err != nil {
		t.Fatal(err)
	}

	got, err := admin.RemoveListener(ctx, want.ID, v1.ProtocolTCP, 80)
	if err != nil || len(got.Spec.Listeners) != 0 {
		t.Errorf("RemoveListener(TCP, 80) = %+v, %v; want the load balancer without listeners", got, err)
	}
	got, err = admin.RemoveBackend(ctx, want.ID, "fake://i-n-2")
	if diff := cmp.Diff([]loadbalancer.Backend{{ProviderID: "fake://i-n-1"}}, got.Spec.Backends, equate); err != nil || diff != "" {
		t.Errorf("RemoveBackend(fake://i-n-2) = %v; backends (-want +got):\n%s", err, diff)
	}
	if now, _ := cloud.LoadBalancerFor("c", svc); !cmp.Equal(got, now, equate) {
		t.Errorf("the client returned %+v; the cloud has %+v", got, now)
	}
	if after, err := admin.Calls(ctx); err != nil || !cmp.Equal(calls, after) {
		t.Errorf("Calls() after the edits = %+v, %v; want %+v: the edits are not cloud calls", after, err, calls)
	}

	var apiErr *fakecloud.APIError
	for _, tt := range []struct {
		name, reason string
		do           func() error
		status       int
	}{
		{"no such backend", "the load balancer has no backend of that key", func() error { _, err := admin.RemoveBackend(ctx, want.ID, "fake://i-n-9"); return err }, http.StatusNotFound},
		{"no such load balancer", "no load balancer has that ID", func() error { _, err := admin.RemoveListener(ctx, "lb-404", v1.ProtocolTCP, 80); return err }, http.StatusNotFound},
		{"ID given", "the cloud assigns IDs", func() error {
			_, err := admin.CreateLoadBalancer(ctx, loadbalancer.LoadBalancer{ID: "lb-7", Name: "x", Spec: loadbalancer.Spec{IPFamilies: []v1.IPFamily{v1.IPv4Protocol}}})
			return err
		}, http.StatusBadRequest},
	} {
		if err := tt.do(); !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status || apiErr.Message == "" {
			t.Errorf("%s: err = %v; want an *APIError %d with a message (%s)", tt.name, err, tt.status, tt.reason)
		}
	}

	if err := admin.ClearFaults(ctx); err != nil { // drops the CCM's load-balancer cache
		t.Fatal(err)
	}
	if _, err := lb.EnsureLoadBalancer(ctx, "c", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if repaired, _ := cloud.LoadBalancerFor("c", svc); !cmp.Equal(want, repaired, equate) {
		t.Errorf("after ClearFaults, EnsureLoadBalancer left %+v; want the drift repaired: %+v", repaired, want)
	}
}
