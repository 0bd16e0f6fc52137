package fake_test

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/admin"
	"github.com/ccmkit/ccmkit/fake/statefile"
)

const cluster = "test-cluster"

// withStateFile runs every test that builds its cloud with newCloud on a
// shared state file of its own (go test ./fake -args -statefile): the
// whole suite then checks that the file-backed store behaves as the
// in-memory one.
var withStateFile = flag.Bool("statefile", false, "build the clouds of newCloud with a Config.StateFile in the test's temporary directory")

// newCloud builds a fake with cfg and opts, failing the test on error.
func newCloud(t testing.TB, cfg fake.Config, opts ...fake.Options) *fake.Cloud {
	t.Helper()
	if *withStateFile && cfg.StateFile == "" {
		cfg.StateFile = filepath.Join(t.TempDir(), "cloud.json")
	}
	c, err := openCloud(cfg, oneOptions(opts))
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

// openCloud is fake.New, over the state file cfg.StateFile (when set), as
// the registered provider builds it.
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

// cloudWithNodes builds a fake with n running instances node-01..node-<n> and
// returns their Nodes.
func cloudWithNodes(t testing.TB, cfg fake.Config, n int, opts ...fake.Options) (*fake.Cloud, []*v1.Node) {
	t.Helper()
	for i := range n {
		cfg.Instances = append(cfg.Instances, fake.Instance{Name: nodeName(i + 1)})
	}
	c := newCloud(t, cfg, opts...)
	var nodes []*v1.Node
	for _, in := range c.Snapshot().Instances {
		nodes = append(nodes, mustNode(t, c, in.ID))
	}
	return c, nodes
}

// oneOptions returns the one Options of a helper's optional argument, or
// the zero Options.
func oneOptions(opts []fake.Options) fake.Options {
	switch len(opts) {
	case 0:
		return fake.Options{}
	case 1:
		return opts[0]
	}
	panic("more than one fake.Options")
}

// failRandomly returns interceptor Funcs that fail calls of ops (every
// operation when none is given) with err, each with probability p,
// reproducibly: the same seed fails the same calls, in call order.
func failRandomly(seed uint64, p float64, err error, ops ...fake.Op) fake.Funcs {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed))
	return fake.Failing(func(op fake.Op) (error, bool) {
		if len(ops) > 0 && !slices.Contains(ops, op) {
			return nil, false
		}
		mu.Lock()
		defer mu.Unlock()
		if rng.Float64() < p {
			return err, false
		}
		return nil, false
	})
}

func nodeName(i int) string { return fmt.Sprintf("node-%02d", i) }

func mustNode(t testing.TB, c *fake.Cloud, id string) *v1.Node {
	t.Helper()
	n, err := c.NodeFor(id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// capability calls an accessor and fails the test unless it returns
// (impl, true).
func capability[T any](t testing.TB, name string, accessor func() (T, bool)) T {
	t.Helper()
	v, ok := accessor()
	if !ok || any(v) == nil {
		t.Fatalf("%s() = %v, %v; want an implementation", name, v, ok)
	}
	return v
}

func lbOf(t testing.TB, c cloudprovider.Interface) cloudprovider.LoadBalancer {
	t.Helper()
	return capability(t, "LoadBalancer", c.LoadBalancer)
}

func routesOf(t testing.TB, c cloudprovider.Interface) cloudprovider.Routes {
	t.Helper()
	return capability(t, "Routes", c.Routes)
}

func instancesOf(t testing.TB, c cloudprovider.Interface) cloudprovider.InstancesV2 {
	t.Helper()
	return capability(t, "InstancesV2", c.InstancesV2)
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

// tickingClock is a fake clock that moves a second on every reading, so
// each call the cloud makes finds a read budget refilled.
type tickingClock struct{ *clocktesting.FakeClock }

// Now steps the clock a second and returns the time.
func (c tickingClock) Now() time.Time {
	c.Step(time.Second)
	return c.FakeClock.Now()
}

// Since returns the time since t, after stepping the clock a second.
func (c tickingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
