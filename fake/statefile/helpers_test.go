package statefile_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/admin"
	"github.com/ccmkit/ccmkit/fake/statefile"
)

// cluster is the --cluster-name of the tests' calls.
const cluster = "test-cluster"

// realisticProvisioningDelay is the provisioning delay of realistic mode
// (fake.Config.Realistic).
const realisticProvisioningDelay = 2 * time.Second

// cmpModel lets go-cmp compare what holds the loadbalancer model (State,
// LoadBalancer): its addresses and CIDRs are net/netip values.
var cmpModel = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

// openCloud builds the fake of cfg and opts over the state file
// cfg.StateFile (when set), as the registered provider does.
func openCloud(cfg fake.Config, opts fake.Options) (*fake.Cloud, error) {
	if cfg.StateFile != "" && opts.Persistence == nil {
		f, err := statefile.Open(cfg.StateFile)
		if err != nil {
			return nil, err
		}
		opts.Persistence = f
	}
	return fake.New(cfg, opts)
}

// newCloud is openCloud, failing the test on error.
func newCloud(t testing.TB, cfg fake.Config, opts ...fake.Options) *fake.Cloud {
	t.Helper()
	var o fake.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	c, err := openCloud(cfg, o)
	if err != nil {
		t.Fatalf("fake.New: %v", err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// startAdmin builds a fake with cfg and opts and serves its admin API
// (admin.Handler) on a loopback test server, returning its base URL.
func startAdmin(t *testing.T, cfg fake.Config, opts ...fake.Options) (*fake.Cloud, string) {
	t.Helper()
	c := newCloud(t, cfg, opts...)
	srv := httptest.NewServer(admin.Handler(c))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

// get sends GET url and returns the status and the body.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// epoch is the fake clocks' start.
var epoch = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// newClock returns a fake clock and the fake.Options that make it the
// cloud's clock.
func newClock() (*clocktesting.FakeClock, fake.Options) {
	clk := clocktesting.NewFakeClock(epoch)
	return clk, fake.Options{Clock: clk}
}

// retryAfter returns the delay of the innermost *api.RetryError err
// wraps, failing the test when it wraps none.
func retryAfter(t *testing.T, what string, err error) time.Duration {
	t.Helper()
	var last *api.RetryError
	for _, e := range chain(err) {
		if re, ok := e.(*api.RetryError); ok { //nolint:errorlint // e is one link of the chain, walked by hand for the innermost; errors.As finds the outermost
			last = re
		}
	}
	if last == nil {
		t.Fatalf("%s = %v; want an error wrapping *api.RetryError", what, err)
	}
	return last.RetryAfter()
}

// chain returns err and every error it wraps, depth first.
func chain(err error) []error {
	if err == nil {
		return nil
	}
	out := []error{err}
	switch u := err.(type) { //nolint:errorlint // unwraps one level by hand to list the chain
	case interface{ Unwrap() error }:
		out = append(out, chain(u.Unwrap())...)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			out = append(out, chain(e)...)
		}
	}
	return out
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

func routesOf(t testing.TB, c cloudprovider.Interface) cloudprovider.Routes {
	t.Helper()
	r, ok := c.Routes()
	if !ok || r == nil {
		t.Fatalf("Routes() = %v, %v; want an implementation", r, ok)
	}
	return r
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

// checkDistinctIPs fails the test if two instances of st share an internal
// address.
func checkDistinctIPs(t *testing.T, st fake.State) {
	t.Helper()
	seen := map[string]string{}
	for _, in := range st.Instances {
		for _, ip := range in.InternalIPs {
			if other, dup := seen[ip]; dup {
				t.Errorf("instances %s and %s share %s", other, in.ID, ip)
			}
			seen[ip] = in.ID
		}
	}
}
