package fake_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// kubernetes is the --cluster-name of almost every cluster: both clusters
// of the isolation tests pass it.
const kubernetes = "kubernetes"

// twoClusters returns a cloud as cluster "blue" and a Peer of it as
// cluster "green", over one cloud with instances node-01 and node-02, and
// the Node of each.
func twoClusters(t *testing.T) (blue, green *fake.Cloud, nodes []*v1.Node) {
	t.Helper()
	blue, nodes = cloudWithNodes(t, fake.Config{ClusterID: "blue"}, 2)
	green, err := fake.NewPeer(blue, "green", fake.PeerOptions{})
	if err != nil {
		t.Fatalf("Peer: %v", err)
	}
	t.Cleanup(green.Shutdown)
	return blue, green, nodes
}

// TestPeerLoadBalancerIsolation: two clusters on one cloud, both run with
// --cluster-name=kubernetes, each with a Service of the same namespace,
// name and UID: neither sees, changes nor deletes the other's load
// balancer.
func TestPeerLoadBalancerIsolation(t *testing.T) {
	blue, green, nodes := twoClusters(t)
	svc := service("web") // the same object in both clusters: same UID
	stBlue, err := lbOf(t, blue).EnsureLoadBalancer(t.Context(), kubernetes, svc, nodes)
	if err != nil {
		t.Fatalf("blue EnsureLoadBalancer: %v", err)
	}
	lbBlue, ok := blue.LoadBalancerFor(kubernetes, svc)
	if !ok || lbBlue.Tags[loadbalancer.TagCluster] != "blue" {
		t.Fatalf("blue's load balancer: %+v, found %v; want one tagged cluster blue", lbBlue, ok)
	}
	if _, exists, err := lbOf(t, green).GetLoadBalancer(t.Context(), kubernetes, svc); err != nil || exists {
		t.Errorf("green GetLoadBalancer before green ensured = exists %v, %v; want false: blue's is not green's", exists, err)
	}
	if err := lbOf(t, green).UpdateLoadBalancer(t.Context(), kubernetes, svc, nodes[:1]); err == nil {
		t.Errorf("green UpdateLoadBalancer before green ensured = nil; want not found (it must not update blue's)")
	}
	stGreen, err := lbOf(t, green).EnsureLoadBalancer(t.Context(), kubernetes, svc, nodes[:1])
	if err != nil {
		t.Fatalf("green EnsureLoadBalancer: %v", err)
	}
	if cmp.Equal(stBlue, stGreen) {
		t.Errorf("green's status %v equals blue's; want a load balancer of its own", stGreen)
	}
	if err := lbOf(t, green).UpdateLoadBalancer(t.Context(), kubernetes, svc, nil); err != nil {
		t.Fatalf("green UpdateLoadBalancer(no nodes): %v", err)
	}
	if err := lbOf(t, green).EnsureLoadBalancerDeleted(t.Context(), kubernetes, svc); err != nil {
		t.Fatalf("green EnsureLoadBalancerDeleted: %v", err)
	}
	if _, ok := green.LoadBalancerFor(kubernetes, svc); ok {
		t.Errorf("green's load balancer still exists after green deleted it")
	}
	after, ok := blue.LoadBalancerFor(kubernetes, svc)
	if !ok {
		t.Fatalf("blue's load balancer is gone after green deleted its own")
	}
	if diff := cmp.Diff(lbBlue, after, fake.CmpModel); diff != "" {
		t.Errorf("blue's load balancer changed by green's calls (-before +after):\n%s", diff)
	}
	if n := len(blue.Snapshot().LoadBalancers); n != 1 {
		t.Errorf("%d load balancers in the cloud; want blue's only", n)
	}
}

// TestPeerRouteIsolation: two clusters both named kubernetes, with Nodes
// of the same names, list only their own routes, and deleting one's route
// leaves the other's. (Their pod CIDRs differ: on one network a
// destination routes to one place, and the routes.Table refuses one that
// another cluster holds.)
func TestPeerRouteIsolation(t *testing.T) {
	blue, green, nodes := twoClusters(t)
	create := func(c *fake.Cloud, node *v1.Node, cidr string) {
		t.Helper()
		r := &cloudprovider.Route{TargetNode: types.NodeName(node.Name), DestinationCIDR: cidr}
		if err := routesOf(t, c).CreateRoute(t.Context(), kubernetes, string(node.UID), r); err != nil {
			t.Fatalf("CreateRoute(%s → %s): %v", cidr, node.Name, err)
		}
	}
	create(blue, nodes[0], "10.244.0.0/24")
	create(blue, nodes[1], "10.244.1.0/24")
	create(green, nodes[0], "10.245.0.0/24")
	cidrs := func(c *fake.Cloud) []string {
		t.Helper()
		rs, err := routesOf(t, c).ListRoutes(t.Context(), kubernetes)
		if err != nil {
			t.Fatalf("ListRoutes: %v", err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.DestinationCIDR)
		}
		return out
	}
	if diff := cmp.Diff([]string{"10.244.0.0/24", "10.244.1.0/24"}, cidrs(blue), fake.CmpModel); diff != "" {
		t.Errorf("blue's routes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"10.245.0.0/24"}, cidrs(green), fake.CmpModel); diff != "" {
		t.Errorf("green's routes (-want +got):\n%s", diff)
	}
	listed, err := routesOf(t, green).ListRoutes(t.Context(), kubernetes)
	if err != nil {
		t.Fatal(err)
	}
	if err := routesOf(t, green).DeleteRoute(t.Context(), kubernetes, listed[0]); err != nil {
		t.Fatalf("green DeleteRoute: %v", err)
	}
	if got := cidrs(green); len(got) != 0 {
		t.Errorf("green's routes after deleting its only one: %v; want none", got)
	}
	if diff := cmp.Diff([]string{"10.244.0.0/24", "10.244.1.0/24"}, cidrs(blue), fake.CmpModel); diff != "" {
		t.Errorf("blue's routes after green deleted its own (-want +got):\n%s", diff)
	}
	var owners []string
	for _, r := range blue.Snapshot().Routes {
		owners = append(owners, r.Cluster)
	}
	if diff := cmp.Diff([]string{"blue", "blue"}, owners, fake.CmpModel); diff != "" { // green's is gone
		t.Errorf("owners of the routes in the cloud (-want +got):\n%s", diff)
	}
}

// TestPeerSharesTheCloud: a Peer is another cluster over the same cloud
// account: it sees the same instances, draws from the same rate limit and
// provisioning delay, and counts its own calls.
func TestPeerSharesTheCloud(t *testing.T) {
	blue, green, _ := twoClusters(t)
	added, err := blue.AddInstance(fake.Instance{Name: "node-03"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := instancesOf(t, green).InstanceExists(t.Context(), mustNode(t, green, added.ID)); err != nil || !ok {
		t.Errorf("green InstanceExists(instance added through blue) = %v, %v; want true", ok, err)
	}
	if !green.HasClusterID() {
		t.Errorf("green.HasClusterID() = false; want true")
	}
	if got := green.Snapshot().ClusterID; got != "green" {
		t.Errorf("green's snapshot clusterID = %q; want green", got)
	}
	if calls := blue.Calls(); calls.Reads != 0 {
		t.Errorf("blue's counters after green's calls = %+v; want zero (each Cloud counts its own)", calls)
	}
	// Blue lists its load balancers before the limit, so that its look-up
	// below is a Find.
	if _, _, err := lbOf(t, blue).GetLoadBalancer(t.Context(), kubernetes, service("x")); err != nil {
		t.Fatal(err)
	}
	limit := fake.RateLimit{ReadsPerSecond: ptr.To(1.0), Burst: 2}
	if err := blue.SetRateLimit(limit); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(limit, green.RateLimit(), fake.CmpModel); diff != "" {
		t.Errorf("green's rate limit after blue set it (-want +got):\n%s", diff)
	}
	if err := green.SetProvisioningDelay(time.Second); err != nil {
		t.Fatal(err)
	}
	if got := blue.ProvisioningDelay(); got != time.Second {
		t.Errorf("blue's provisioning delay after green set it = %v; want 1s", got)
	}
	// Two tokens for both clusters: green's look-ups of two Services
	// without a load balancer spend them (the first, its cache's List,
	// whose miss it answers; the second, a Find by tags confirming its
	// miss; the name steps trust the list).
	for _, name := range []string{"x", "y"} {
		if _, _, err := lbOf(t, green).GetLoadBalancer(t.Context(), kubernetes, service(name)); err != nil {
			t.Fatalf("green's look-up of %s with a full bucket: %v", name, err)
		}
	}
	// Blue's look-up is throttled at once (GetLoadBalancer then waits the
	// throttle out: loadbalancer.Options.MaxThrottleWait).
	blue.ResetCalls()
	if _, _, err := lbOf(t, blue).GetLoadBalancer(t.Context(), kubernetes, service("x")); err != nil {
		t.Errorf("blue's look-up after green spent the shared bucket: %v; want it to wait the throttle out", err)
	}
	if calls := blue.Calls(); calls.ThrottledByOp[fake.OpFindLoadBalancers] < 1 {
		t.Errorf("blue's calls = %+v; want its first Find throttled: the bucket is shared", calls)
	}
	if got := green.Calls().Throttled; got != 0 {
		t.Errorf("green's throttled calls = %d; want 0 (blue's throttled call is blue's)", got)
	}
}

// TestPeerOptions: a Peer does not inherit its cloud's interceptor (it
// models another API client), and a BackendKey or cluster ID it cannot
// have is refused.
func TestPeerOptions(t *testing.T) {
	down := errors.New("blue's API client is broken")
	c := newCloud(t, fake.Config{}, fake.Options{Interceptor: fake.Funcs{ListLoadBalancers: func(context.Context, loadbalancer.ListDriver) ([]*loadbalancer.LoadBalancer, error) {
		return nil, down
	}}})
	peer, err := fake.NewPeer(c, "other", fake.PeerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := lbOf(t, c).GetLoadBalancer(t.Context(), kubernetes, service("web")); !errors.Is(err, down) {
		t.Errorf("GetLoadBalancer through the cloud with the interceptor = %v; want its error", err)
	}
	if _, _, err := lbOf(t, peer).GetLoadBalancer(t.Context(), kubernetes, service("web")); err != nil {
		t.Errorf("GetLoadBalancer through the peer = %v; want no interceptor", err)
	}
	if _, err := fake.NewPeer(c, "other", fake.PeerOptions{LoadBalancerCapabilities: &loadbalancer.Capabilities{BackendKey: loadbalancer.BackendKeyProviderID}}); err == nil ||
		!strings.Contains(err.Error(), "BackendKey") {
		t.Errorf("Peer with a BackendKey the cloud does not keep = %v; want an error naming BackendKey", err)
	}
	if _, err := fake.NewPeer(c, "green ", fake.PeerOptions{}); err == nil || !strings.Contains(err.Error(), `clusterID: Invalid value: "green "`) {
		t.Errorf("Peer(%q) = %v; want an error naming clusterID and the value", "green ", err)
	}
}
