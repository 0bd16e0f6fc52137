package admin_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/admin"
	"github.com/ccmkit/ccmkit/fake/statefile"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// cluster is the --cluster-name of the tests' calls.
const cluster = "test-cluster"

// newCloud builds a fake with cfg and opts, failing the test on error.
func newCloud(t testing.TB, cfg fake.Config, opts ...fake.Options) *fake.Cloud {
	t.Helper()
	var o fake.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if cfg.StateFile != "" {
		f, err := statefile.Open(cfg.StateFile)
		if err != nil {
			t.Fatal(err)
		}
		o.Persistence = f
	}
	c, err := fake.New(cfg, o)
	if err != nil {
		t.Fatalf("fake.New: %v", err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// startAdmin builds a fake with the admin endpoint on a free loopback port,
// initializes it as the CCM does, and returns its base URL.
func startAdmin(t *testing.T, cfg fake.Config, opts ...fake.Options) (*fake.Cloud, string) {
	t.Helper()
	if cfg.Admin.Address == "" {
		cfg.Admin.Address = "127.0.0.1:0"
	}
	c := newCloud(t, cfg, opts...)
	a, err := admin.New(c, admin.Options{AdminSection: cfg.Admin})
	if err != nil {
		t.Fatal(err)
	}
	return c, "http://" + admin.InitializeAdmin(t, a)
}

// newAdmin builds a fake of cfg serving its admin endpoint as cfg.Admin
// says, from Initialize on.
func newAdmin(t testing.TB, cfg fake.Config) *admin.Cloud {
	t.Helper()
	a, err := admin.New(newCloud(t, cfg), admin.Options{AdminSection: cfg.Admin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	return a
}

// isRetry reports whether err is a throttled call's *api.RetryError.
func isRetry(err error) bool {
	var re *api.RetryError
	return errors.As(err, &re)
}

// epoch is the fake clocks' start.
var epoch = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// newClock returns a fake clock and the fake.Options that make it the
// cloud's clock.
func newClock() (*clocktesting.FakeClock, fake.Options) {
	clk := clocktesting.NewFakeClock(epoch)
	return clk, fake.Options{Clock: clk}
}

func mustNode(t testing.TB, c *fake.Cloud, id string) *v1.Node {
	t.Helper()
	n, err := c.NodeFor(id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func lbOf(t testing.TB, c cloudprovider.Interface) cloudprovider.LoadBalancer {
	t.Helper()
	lb, ok := c.LoadBalancer()
	if !ok || lb == nil {
		t.Fatalf("LoadBalancer() = %v, %v; want an implementation", lb, ok)
	}
	return lb
}

func instancesOf(t testing.TB, c cloudprovider.Interface) cloudprovider.InstancesV2 {
	t.Helper()
	v2, ok := c.InstancesV2()
	if !ok || v2 == nil {
		t.Fatalf("InstancesV2() = %v, %v; want an implementation", v2, ok)
	}
	return v2
}

// service returns a LoadBalancer Service with one TCP port.
func service(name string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeLoadBalancer,
			Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
		},
	}
}

// ensured runs EnsureLoadBalancer for svc on nodes and returns the load
// balancer the fake keeps for it.
func ensured(t *testing.T, c *fake.Cloud, svc *v1.Service, nodes []*v1.Node) fake.LoadBalancer {
	t.Helper()
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer(%s): %v", svc.Name, err)
	}
	lb, ok := c.LoadBalancerFor(cluster, svc)
	if !ok {
		t.Fatalf("no load balancer for %s after EnsureLoadBalancer", svc.Name)
	}
	return lb
}

// consoleLB is a load balancer a user creates in the cloud's console:
// another cluster's, as its ccmkit tags say, with one IPv4 listener and a
// backend by Node name.
func consoleLB() loadbalancer.LoadBalancer {
	return loadbalancer.LoadBalancer{
		Name: "other-web",
		Tags: map[string]string{loadbalancer.TagCluster: "other", loadbalancer.TagServiceUID: "uid-other", loadbalancer.TagService: "default/web"},
		Spec: loadbalancer.Spec{
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Listeners:  []loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080}},
			Backends:   []loadbalancer.Backend{{NodeName: "node-01", IPv4: netip.MustParseAddr("10.0.0.1")}},
		},
	}
}
