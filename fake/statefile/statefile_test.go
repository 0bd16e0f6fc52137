package statefile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/statefile"
	"github.com/ccmkit/ccmkit/internal/clip"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// sharedClouds builds n Clouds from cfg that share one state file in the
// test's temporary directory, as n processes with the same cloud-config
// would, and returns them with the file's path.
func sharedClouds(t *testing.T, cfg fake.Config, n int, opts ...fake.Options) ([]*fake.Cloud, string) {
	t.Helper()
	cfg.StateFile = filepath.Join(t.TempDir(), "cloud.json")
	var out []*fake.Cloud
	for range n {
		out = append(out, newCloud(t, cfg, opts...))
	}
	return out, cfg.StateFile
}

// readDoc decodes the state file at path as generic JSON.
func readDoc(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("state file %s is not JSON: %v\n%s", path, err, data)
	}
	return doc
}

func generation(t *testing.T, path string) int64 {
	t.Helper()
	g, ok := readDoc(t, path)["generation"].(float64)
	if !ok {
		t.Fatalf("state file %s has no numeric generation", path)
	}
	return int64(g)
}

// dualStack is a cloud-config whose instances have IPv4 and IPv6 addresses
// and whose routes carry node addresses.
func dualStack(names ...string) fake.Config {
	cfg := fake.Config{InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"}, Routes: fake.RoutesSection{EnableNodeAddresses: true}}
	for _, n := range names {
		cfg.Instances = append(cfg.Instances, fake.Instance{Name: n})
	}
	return cfg
}

// ensureFinds calls EnsureLoadBalancer through c for a Service whose load
// balancer another Cloud on the same file made, and fails the test unless
// it returns want without writing (why says why no write is expected).
func ensureFinds(t *testing.T, c *fake.Cloud, svc *v1.Service, nodes []*v1.Node, want *v1.LoadBalancerStatus, why string) {
	t.Helper()
	c.ResetCalls()
	got, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpModel); diff != "" {
		t.Errorf("EnsureLoadBalancer through the other Cloud returned another status (-want +got):\n%s", diff)
	}
	if calls := c.Calls(); calls.Writes != 0 {
		t.Errorf("EnsureLoadBalancer through the other Cloud wrote %v; want nothing: %s", calls.ByOp, why)
	}
}

// TestSharedStateFile: two Clouds built from one cloud-config with one
// state file are one cloud. The second does not seed the instances again;
// a load balancer created through one is found, not duplicated, by
// EnsureLoadBalancer through the other; route and instance changes made
// through either are seen by the other; a third Cloud started later gets
// the whole state.
func TestSharedStateFile(t *testing.T) {
	cfg := dualStack("node-01", "node-02")
	cs, path := sharedClouds(t, cfg, 2)
	a, b := cs[0], cs[1]
	ctx := t.Context()

	// Seeded once.
	if got := b.Snapshot().Instances; len(got) != 2 {
		t.Fatalf("the second Cloud on the file has %d instances; want the 2 seeded by the first, not seeded again", len(got))
	}
	if diff := cmp.Diff(a.Snapshot(), b.Snapshot(), cmpModel); diff != "" {
		t.Fatalf("the Clouds disagree (-a +b):\n%s", diff)
	}
	if f := readDoc(t, path)["format"]; f != statefile.StateFormat {
		t.Errorf("state file format %v; want %q", f, statefile.StateFormat)
	}
	nodes := []*v1.Node{mustNode(t, a, "i-1"), mustNode(t, a, "i-2")}

	// A load balancer created through a is found by b: same ingress, no
	// write.
	svc := service("web")
	stA, err := lbOf(t, a).EnsureLoadBalancer(ctx, cluster, svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok, err := lbOf(t, b).GetLoadBalancer(ctx, cluster, svc); err != nil || !ok || !cmp.Equal(st, stA) {
		t.Errorf("GetLoadBalancer through b = %v, %v, %v; want %v, true", st, ok, err, stA)
	}
	ensureFinds(t, b, svc, nodes, stA, "the load balancer exists and is converged")
	if lbs := a.Snapshot().LoadBalancers; len(lbs) != 1 {
		t.Fatalf("the cloud has %d load balancers; want 1", len(lbs))
	}
	before, _ := a.LoadBalancerFor(cluster, svc)

	// A port change through b reaches the same load balancer, seen by a.
	moved := svc.DeepCopy()
	moved.Spec.Ports[0].Port = 8080
	if _, err := lbOf(t, b).EnsureLoadBalancer(ctx, cluster, moved, nodes); err != nil {
		t.Fatal(err)
	}
	after, ok := a.LoadBalancerFor(cluster, svc)
	if !ok || after.ID != before.ID || !cmp.Equal(after.VIPs, before.VIPs) || after.Spec.Listeners[0].Port != 8080 {
		t.Errorf("after a port change through b, a sees %+v; want %s with VIPs %v and port 8080", after, before.ID, before.VIPs)
	}

	// Routes created through b are listed by a, node addresses included.
	addrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeHostName, Address: "node-01"}}
	for _, cidr := range []string{"10.244.1.0/24", "fd00:10:244:1::/80"} {
		r := &cloudprovider.Route{TargetNode: "node-01", DestinationCIDR: cidr, TargetNodeAddresses: addrs}
		if err := routesOf(t, b).CreateRoute(ctx, cluster, string(nodes[0].UID), r); err != nil {
			t.Fatal(err)
		}
	}
	listedA, err := routesOf(t, a).ListRoutes(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	listedB, err := routesOf(t, b).ListRoutes(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	byCIDR := cmpopts.SortSlices(func(x, y *cloudprovider.Route) bool { return x.DestinationCIDR < y.DestinationCIDR })
	if len(listedA) != 2 {
		t.Errorf("a lists %d routes; want the 2 created through b", len(listedA))
	}
	if diff := cmp.Diff(listedB, listedA, byCIDR, cmpModel); diff != "" {
		t.Errorf("routes listed through a differ from b's (-b +a):\n%s", diff)
	}

	// Instance changes: b's look-ups see a's stop at once, although b's
	// instance cache was warm.
	v2b := instancesOf(t, b)
	if down, err := v2b.InstanceShutdown(ctx, nodes[0]); down || err != nil {
		t.Fatalf("InstanceShutdown through b = %v, %v; want false", down, err)
	}
	if _, err := a.StopInstance("i-1"); err != nil {
		t.Fatal(err)
	}
	if down, err := v2b.InstanceShutdown(ctx, nodes[0]); !down || err != nil {
		t.Errorf("InstanceShutdown through b after a stopped i-1 = %v, %v; want true", down, err)
	}
	added, err := b.AddInstance(fake.Instance{Name: "node-03"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.AddInstance(fake.Instance{Name: "node-04"})
	if err != nil {
		t.Fatal(err)
	}
	if added.ID == other.ID || cmp.Equal(added.InternalIPs, other.InternalIPs) {
		t.Errorf("instances added through b and a got %s %v and %s %v; want distinct IDs and addresses", added.ID, added.InternalIPs, other.ID, other.InternalIPs)
	}
	n3 := mustNode(t, a, added.ID)
	if ok, err := instancesOf(t, a).InstanceExists(ctx, n3); !ok || err != nil {
		t.Errorf("InstanceExists(%s) through a = %v, %v; want true", added.ID, ok, err)
	}
	if _, err := a.TerminateInstance(added.ID); err != nil {
		t.Fatal(err)
	}
	if ok, err := instancesOf(t, b).InstanceExists(ctx, n3); ok || err != nil {
		t.Errorf("InstanceExists(%s) through b after a terminated it = %v, %v; want false", added.ID, ok, err)
	}

	// A Cloud started later sees everything, seeds nothing.
	cfg.StateFile = path
	late := newCloud(t, cfg)
	if diff := cmp.Diff(a.Snapshot(), late.Snapshot(), cmpModel); diff != "" {
		t.Errorf("a Cloud started later sees another cloud (-a +late):\n%s", diff)
	}

	// Deleted through a: gone for b, its VIP released.
	if err := lbOf(t, a).EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := lbOf(t, b).GetLoadBalancer(ctx, cluster, svc); ok || err != nil {
		t.Errorf("GetLoadBalancer through b after a deleted it = %v, %v; want false", ok, err)
	}
	for _, p := range b.Snapshot().AddressPools {
		if p.Purpose == "loadBalancers" && p.Allocated != 0 {
			t.Errorf("pool %s has %d addresses allocated after the only load balancer was deleted", p.CIDR, p.Allocated)
		}
	}
}

// TestStateFileReloadIsLossless: a load balancer using every feature, and
// routes with node addresses, read back from the file by another Cloud are
// the same: EnsureLoadBalancer there writes nothing, the routes list the
// same. Address allocation continues where it was, as in one process.
func TestStateFileReloadIsLossless(t *testing.T) {
	cs, _ := sharedClouds(t, dualStack("node-01", "node-02"), 2)
	a, b := cs[0], cs[1]
	ctx := t.Context()
	nodes := []*v1.Node{mustNode(t, a, "i-1"), mustNode(t, a, "i-2")}
	svc := service("rich")
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
	svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053})
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 31999
	svc.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24", "2001:db8::/32"}
	svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
	svc.Spec.LoadBalancerIP = "198.18.3.3"
	stA, err := lbOf(t, a).EnsureLoadBalancer(ctx, cluster, svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	ensureFinds(t, b, svc, nodes, stA, "the load balancer read back from the file must equal the one written")
	if diff := cmp.Diff(a.Snapshot(), b.Snapshot(), cmpModel); diff != "" {
		t.Errorf("snapshots (-a +b):\n%s", diff)
	}

	// Allocation continues after the last address, in both processes, as
	// in one: compare with an in-memory cloud doing the same.
	mem := newCloud(t, fake.Config{InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"}, Instances: []fake.Instance{{Name: "node-01"}, {Name: "node-02"}}})
	step := []struct {
		c   *fake.Cloud
		svc string
		del bool
	}{{a, "one", false}, {b, "two", false}, {a, "one", true}, {b, "three", false}, {a, "four", false}}
	var shared, single []string
	for _, s := range step {
		for _, run := range []struct {
			c   *fake.Cloud
			out *[]string
		}{{s.c, &shared}, {mem, &single}} {
			lb := lbOf(t, run.c)
			if s.del {
				if err := lb.EnsureLoadBalancerDeleted(ctx, cluster, service(s.svc)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			st, err := lb.EnsureLoadBalancer(ctx, cluster, service(s.svc), nodes)
			if err != nil {
				t.Fatal(err)
			}
			*run.out = append(*run.out, st.Ingress[0].IP)
		}
	}
	if diff := cmp.Diff(single, shared, cmpModel); diff != "" {
		t.Errorf("VIPs allocated alternately through two Clouds on one file differ from one in-memory cloud's (-memory +shared):\n%s", diff)
	}
}

// TestStateFileConcurrent: goroutines ensure distinct Services and add
// instances through two Clouds on one file, alternately, while reading
// through the other. Every change is saved exactly once (the generation
// counts them), none is lost: one load balancer per Service, distinct VIPs,
// distinct instance IDs and addresses, and both Clouds (and a third started
// afterwards) see the same state. Run with -race.
func TestStateFileConcurrent(t *testing.T) {
	const n = 24
	var saved atomic.Int64
	count := fake.Options{Interceptor: fake.Funcs{
		ApplyLoadBalancer: func(ctx context.Context, next loadbalancer.Driver, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
			lb, err := next.Apply(ctx, a)
			if err == nil {
				saved.Add(1)
			}
			return lb, err
		},
	}}
	cfg := fake.Config{Instances: []fake.Instance{{Name: "node-01"}, {Name: "node-02"}}}
	cs, path := sharedClouds(t, cfg, 2, count)
	nodes := []*v1.Node{mustNode(t, cs[0], "i-1"), mustNode(t, cs[0], "i-2")}
	gen0 := generation(t, path)

	var wg sync.WaitGroup
	errs := make(chan error, 3*n)
	for i := range n {
		wg.Go(func() {
			ctx := t.Context()
			mine, other := cs[i%2], cs[(i+1)%2]
			svc := service(fmt.Sprintf("svc-%02d", i))
			if _, err := lbOf(t, mine).EnsureLoadBalancer(ctx, cluster, svc, nodes); err != nil {
				errs <- fmt.Errorf("EnsureLoadBalancer %s: %w", svc.Name, err)
				return
			}
			if _, ok, err := lbOf(t, other).GetLoadBalancer(ctx, cluster, svc); !ok || err != nil {
				errs <- fmt.Errorf("GetLoadBalancer %s through the other Cloud = %v, %v; want true", svc.Name, ok, err) //nolint:errorlint // err is nil when ok is false: %v prints <nil> where %w would print %!w(<nil>)
			}
			if _, err := other.AddInstance(fake.Instance{Name: fmt.Sprintf("w-%02d", i)}); err != nil {
				errs <- fmt.Errorf("AddInstance: %w", err)
			} else {
				saved.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	if got, want := generation(t, path)-gen0, saved.Load(); got != want {
		t.Errorf("the state file's generation grew by %d; want %d, one per successful write", got, want)
	}
	cfg.StateFile = path
	third := newCloud(t, cfg)
	st := cs[0].Snapshot()
	for i, c := range []*fake.Cloud{cs[1], third} {
		if diff := cmp.Diff(st, c.Snapshot(), cmpModel); diff != "" {
			t.Errorf("Cloud %d sees another state than Cloud 0 (-0 +%d):\n%s", i+1, i+1, diff)
		}
	}
	if len(st.LoadBalancers) != n {
		t.Errorf("%d load balancers; want exactly %d, one per Service", len(st.LoadBalancers), n)
	}
	vips := map[string]string{}
	owners := map[string]string{}
	for _, lb := range st.LoadBalancers {
		for _, ip := range lb.VIPs {
			if o, dup := vips[ip]; dup {
				t.Errorf("VIP %s held by %s and %s", ip, o, lb.ID)
			}
			vips[ip] = lb.ID
		}
		uid := lb.Tags[loadbalancer.TagServiceUID]
		if o, dup := owners[uid]; dup {
			t.Errorf("service UID %s owns %s and %s", uid, o, lb.ID)
		}
		owners[uid] = lb.ID
	}
	if len(st.Instances) != n+2 {
		t.Errorf("%d instances; want %d", len(st.Instances), n+2)
	}
	checkDistinctIPs(t, st)
}

// TestStateFileLock: an operation waits while another process holds the
// lock file.
func TestStateFileLock(t *testing.T) {
	cs, path := sharedClouds(t, fake.Config{}, 1)
	lockf, err := os.OpenFile(path+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("the lock file: %v", err)
	}
	defer lockf.Close()
	if err := syscall.Flock(int(lockf.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := cs[0].AddInstance(fake.Instance{Name: "node-01"})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("AddInstance returned (%v) while another process held %s.lock; want it to wait", err, path)
	case <-time.After(100 * time.Millisecond):
	}
	if err := syscall.Flock(int(lockf.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("AddInstance after the lock was released: %v", err)
	}
}

// withinBound runs call and fails the test if it has not returned after a
// bound far above any deadline the caller gives it (the assertion is that
// it returns at all while the lock is held, not how fast).
func withinBound(t *testing.T, what string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return within 30s while the state-file lock was held; want it to give up at its context's deadline", what)
		return nil
	}
}

// TestStateFileLockHonoursContext: while another process holds the lock
// file, every cloud API call through the provider gives up when its
// context ends, with an error wrapping ErrStateFile and the context's
// error, changes nothing, and leaves no one holding the lock.
func TestStateFileLockHonoursContext(t *testing.T) {
	cs, path := sharedClouds(t, fake.Config{Instances: []fake.Instance{{Name: "node-01"}}}, 1)
	c := cs[0]
	node := mustNode(t, c, "i-1")
	before := c.Snapshot()
	tests := []struct {
		name, reason string
		call         func(ctx context.Context) error
		// tableErr: routes.Table returns its caller's ctx.Err() itself
		// (routes.Table.CreateRoute), not the driver's error.
		tableErr bool
	}{
		{"EnsureLoadBalancer", "a write (Find, then Apply) waits for the lock", func(ctx context.Context) error {
			_, err := lbOf(t, c).EnsureLoadBalancer(ctx, cluster, service("web"), []*v1.Node{node})
			return err
		}, false},
		{"GetLoadBalancer", "a read waits for the lock too", func(ctx context.Context) error {
			_, _, err := lbOf(t, c).GetLoadBalancer(ctx, cluster, service("web"))
			return err
		}, false},
		{"InstanceExists", "the instance look-up brings the state up to date first", func(ctx context.Context) error {
			_, err := instancesOf(t, c).InstanceExists(ctx, node)
			return err
		}, false},
		{"InstanceMetadata", "as InstanceExists", func(ctx context.Context) error {
			_, err := instancesOf(t, c).InstanceMetadata(ctx, node)
			return err
		}, false},
		{"ListRoutes", "the route table is in the file", func(ctx context.Context) error {
			_, err := routesOf(t, c).ListRoutes(ctx, cluster)
			return err
		}, false},
		{"CreateRoute", "a route write, through the Table's batch", func(ctx context.Context) error {
			r := &cloudprovider.Route{TargetNode: "node-01", DestinationCIDR: "10.244.1.0/24"}
			return routesOf(t, c).CreateRoute(ctx, cluster, "uid", r)
		}, true},
	}
	for _, tt := range tests {
		for _, cause := range []struct {
			name string
			ctx  func() (context.Context, context.CancelFunc)
			want error
		}{
			{"deadline", func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(t.Context(), 50*time.Millisecond)
			}, context.DeadlineExceeded},
			{"cancel", func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(50*time.Millisecond, cancel)
				return ctx, cancel
			}, context.Canceled},
		} {
			t.Run(tt.name+"/"+cause.name, func(t *testing.T) {
				release := statefile.HoldStateLock(t, path)
				ctx, cancel := cause.ctx()
				defer cancel()
				err := withinBound(t, tt.name, func() error { return tt.call(ctx) })
				if !errors.Is(err, cause.want) || !tt.tableErr && !errors.Is(err, fake.ErrStateFile) {
					t.Errorf("%s with the lock held = %v; want an error wrapping %v and fake.ErrStateFile (%s)", tt.name, err, cause.want, tt.reason)
				}
				release()
				if !statefile.StateLockIsFree(t, path) {
					t.Errorf("after %s gave up, someone still holds %s.lock; want nobody", tt.name, path)
				}
				if diff := cmp.Diff(before, c.Snapshot(), cmpModel); diff != "" {
					t.Errorf("%s that gave up changed the cloud (-before +after):\n%s", tt.name, diff)
				}
			})
		}
	}
	// The lock released, the same calls succeed.
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("web"), []*v1.Node{node}); err != nil {
		t.Errorf("EnsureLoadBalancer after the lock was released: %v", err)
	}
}

// TestStateFileLockQueuedCaller: a caller of the same Cloud that waits
// behind another one (a control-surface call, which waits for the lock
// without a deadline) still gives up at its own deadline.
func TestStateFileLockQueuedCaller(t *testing.T) {
	cs, path := sharedClouds(t, fake.Config{Instances: []fake.Instance{{Name: "node-01"}}}, 2)
	c, other := cs[0], cs[1]
	node := mustNode(t, c, "i-1")
	release := statefile.HoldStateLock(t, path)
	added := make(chan error, 1)
	go func() {
		_, err := c.AddInstance(fake.Instance{Name: "node-02"}) // waits for the lock, no deadline
		added <- err
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := withinBound(t, "InstanceExists behind AddInstance", func() error {
		_, err := instancesOf(t, c).InstanceExists(ctx, node)
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, fake.ErrStateFile) {
		t.Errorf("InstanceExists queued behind a waiting AddInstance = %v; want an error wrapping context.DeadlineExceeded and fake.ErrStateFile", err)
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	err = withinBound(t, "EnsureLoadBalancer through another Cloud", func() error {
		_, err := lbOf(t, other).EnsureLoadBalancer(ctx2, cluster, service("web"), []*v1.Node{node})
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, fake.ErrStateFile) {
		t.Errorf("EnsureLoadBalancer through another Cloud on the file = %v; want an error wrapping context.DeadlineExceeded and fake.ErrStateFile", err)
	}
	release()
	if err := <-added; err != nil {
		t.Fatalf("AddInstance after the lock was released: %v", err)
	}
	if got := len(other.Snapshot().Instances); got != 2 {
		t.Errorf("%d instances after AddInstance; want 2", got)
	}
}

// validStateFile creates a state file holding one instance and one load
// balancer and returns its cloud-config and content.
func validStateFile(t *testing.T) (fake.Config, []byte) {
	t.Helper()
	cs, path := sharedClouds(t, fake.Config{Instances: []fake.Instance{{Name: "node-01"}}}, 1)
	if _, err := lbOf(t, cs[0]).EnsureLoadBalancer(t.Context(), cluster, service("web"), []*v1.Node{mustNode(t, cs[0], "i-1")}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fake.Config{Instances: []fake.Instance{{Name: "node-01"}}, StateFile: path}, data
}

// edit decodes a state file, applies f and encodes it again.
func edit(t *testing.T, data []byte, f func(doc map[string]any)) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	f(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func item(doc map[string]any, list string, i int) map[string]any {
	return doc[list].([]any)[i].(map[string]any)
}

// TestStateFileCorrupt: a state file that is not one, or does not fit the
// cloud-config, is an error wrapping ErrStateFile that names the file and
// the problem; the file is left as it was (never reset).
func TestStateFileCorrupt(t *testing.T) {
	tests := []struct {
		name    string
		reason  string
		content func(valid []byte) []byte
		config  func(*fake.Config)
		want    []string
	}{
		{name: "truncated", reason: "a partial file is not a state", content: func(v []byte) []byte { return v[:len(v)/2] },
			want: []string{"not a valid state file"}},
		{name: "empty", reason: "an empty file is not an empty cloud", content: func([]byte) []byte { return nil }, want: []string{"empty"}},
		{name: "trailing data", reason: "one document", content: func(v []byte) []byte { return append(v, "{}"...) }, want: []string{"data after"}},
		{name: "an array", reason: "a JSON value of another kind: the error says what was expected, not a Go type", content: func([]byte) []byte { return []byte("[]") },
			want: []string{"a JSON array: expected a JSON object written by the fake"}},
		{name: "other format", reason: "the format is checked", want: []string{`format "v0"`},
			content: func(v []byte) []byte { return edit(t, v, func(d map[string]any) { d["format"] = "v0" }) }},
		{name: "unknown field", reason: "decoded strictly", want: []string{`unknown field "extra"`},
			content: func(v []byte) []byte { return edit(t, v, func(d map[string]any) { d["extra"] = 1 }) }},
		{name: "bad VIP", reason: "addresses are parsed", want: []string{"loadBalancers[0]", "vips[0]", "not-an-ip"},
			content: func(v []byte) []byte {
				return edit(t, v, func(d map[string]any) { item(d, "loadBalancers", 0)["vips"] = []any{"not-an-ip"} })
			}},
		{name: "VIP outside the pool", reason: "a VIP comes from the pool", want: []string{"loadBalancers[0]", "vips[0] 203.0.113.1", "pool"},
			content: func(v []byte) []byte {
				return edit(t, v, func(d map[string]any) { item(d, "loadBalancers", 0)["vips"] = []any{"203.0.113.1"} })
			}},
		{name: "duplicate instance", reason: "IDs are unique", want: []string{"instances[1].id", "once"},
			content: func(v []byte) []byte {
				return edit(t, v, func(d map[string]any) { d["instances"] = append(d["instances"].([]any), item(d, "instances", 0)) })
			}},
		{name: "invalid instance", reason: "instances are validated", want: []string{"instances[0].state", "paused"},
			content: func(v []byte) []byte {
				return edit(t, v, func(d map[string]any) { item(d, "instances", 0)["state"] = "paused" })
			}},
		{name: "state of 10k characters", reason: "the value is quoted cut to the one bound, clip.MaxQuoted", want: []string{"instances[0].state", strconv.Quote(clip.Quoted(strings.Repeat("s", 10_000)))},
			content: func(v []byte) []byte {
				return edit(t, v, func(d map[string]any) { item(d, "instances", 0)["state"] = strings.Repeat("s", 10_000) })
			}},
		{name: "other pools", reason: "every process sharing the file has the same cloud-config", want: []string{"cloud.loadBalancers", "same cloud-config"},
			config: func(c *fake.Config) { c.LoadBalancers.IPv4Pool = "192.0.2.0/24" }},
		{name: "other backends mode", reason: "what a load balancer keeps of its backends is the cloud's", want: []string{"cloud.loadBalancers", "same cloud-config"},
			config: func(c *fake.Config) { c.LoadBalancers.Backends = fake.BackendsInstanceID }},
		{name: "bad backend key", reason: "one of loadbalancer's keys", want: []string{"loadBalancers[0]", `backendKey "VM"`},
			content: func(v []byte) []byte {
				return edit(t, v, func(d map[string]any) { item(d, "loadBalancers", 0)["backendKey"] = "VM" })
			}},
		{name: "provisioning flag", reason: "readyAt decides, the flag is only reported", want: []string{"loadBalancers[0]", "provisioning", "readyAt"},
			content: func(v []byte) []byte {
				return edit(t, v, func(d map[string]any) { item(d, "loadBalancers", 0)["provisioning"] = true })
			}},
		{name: "bad readyAt", reason: "a time", want: []string{"not a valid state file", "readyAt"},
			content: func(v []byte) []byte {
				return edit(t, v, func(d map[string]any) { item(d, "loadBalancers", 0)["readyAt"] = "soon" })
			}},
		{name: "other instance CIDRs", reason: "every process sharing the file has the same cloud-config", want: []string{"cloud.instanceCIDRs", "10.9.0.0/16"},
			config: func(c *fake.Config) { c.InstanceCIDRs = []string{"10.9.0.0/16"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, data := validStateFile(t)
			if tt.content != nil {
				data = tt.content(data)
			}
			if tt.config != nil {
				tt.config(&cfg)
			}
			if err := os.WriteFile(cfg.StateFile, data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := openCloud(cfg, fake.Options{})
			if !errors.Is(err, fake.ErrStateFile) {
				t.Fatalf("New = %v; want an error wrapping ErrStateFile (%s)", err, tt.reason)
			}
			for _, w := range append([]string{cfg.StateFile}, tt.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New = %q; want it to contain %q (%s)", err, w, tt.reason)
				}
			}
			if got, _ := os.ReadFile(cfg.StateFile); string(got) != string(data) {
				t.Errorf("the state file changed after the error; want it left as it was")
			}
		})
	}
}

// TestStateFileBrokenWhileRunning: when another process leaves a broken
// state file, or removes it, cloud calls fail with an error naming the
// file, the admin endpoint answers 500, Snapshot keeps the state last
// loaded, and nothing overwrites the file.
func TestStateFileBrokenWhileRunning(t *testing.T) {
	cfg := fake.Config{Instances: []fake.Instance{{Name: "node-01"}}, StateFile: filepath.Join(t.TempDir(), "cloud.json")}
	c, base := startAdmin(t, cfg)
	ctx := t.Context()
	nodes := []*v1.Node{mustNode(t, c, "i-1")}
	if _, err := lbOf(t, c).EnsureLoadBalancer(ctx, cluster, service("web"), nodes); err != nil {
		t.Fatal(err)
	}
	garbage := []byte(`{"format": "` + statefile.StateFormat + `", "generation": `)
	tmp := cfg.StateFile + ".new"
	if err := os.WriteFile(tmp, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cfg.StateFile); err != nil {
		t.Fatal(err)
	}

	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, fake.ErrStateFile) || !strings.Contains(err.Error(), cfg.StateFile) {
			t.Errorf("%s = %v; want an error wrapping ErrStateFile naming %s", what, err, cfg.StateFile)
		}
	}
	_, err := lbOf(t, c).EnsureLoadBalancer(ctx, cluster, service("other"), nodes)
	check("EnsureLoadBalancer", err)
	_, _, err = lbOf(t, c).GetLoadBalancer(ctx, cluster, service("web"))
	check("GetLoadBalancer", err)
	_, err = c.AddInstance(fake.Instance{Name: "node-02"})
	check("AddInstance", err)
	_, err = instancesOf(t, c).InstanceExists(ctx, nodes[0])
	check("InstanceExists", err)
	if st := c.Snapshot(); len(st.LoadBalancers) != 1 || len(st.Instances) != 1 {
		t.Errorf("Snapshot = %d load balancers, %d instances; want the state last loaded (1, 1), never an empty cloud", len(st.LoadBalancers), len(st.Instances))
	}
	if status, body := get(t, base+"/state"); status != http.StatusInternalServerError || !strings.Contains(string(body), cfg.StateFile) {
		t.Errorf("GET /state = %d %s; want 500 naming the state file", status, body)
	}
	if got, _ := os.ReadFile(cfg.StateFile); string(got) != string(garbage) {
		t.Errorf("the broken state file was overwritten with %s; want it left for a person to look at", got)
	}

	if err := os.Remove(cfg.StateFile); err != nil {
		t.Fatal(err)
	}
	_, err = c.StopInstance("i-1")
	check("StopInstance after the file was removed", err)
	if err == nil || !strings.Contains(err.Error(), "removed") {
		t.Errorf("StopInstance after the file was removed = %v; want it to say the file was removed", err)
	}
	if _, err := os.Stat(cfg.StateFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the removed state file was recreated (stat: %v); want no silent reset", err)
	}
}

// BenchmarkStateFile measures what the shared state file costs, on a small
// cloud (10 instances, 10 load balancers): a read when no other process
// wrote (lock, stat), a write (lock, stat, save), and a read after another
// Cloud wrote (lock, stat, reload).
func BenchmarkStateFile(b *testing.B) {
	cfg := fake.Config{StateFile: filepath.Join(b.TempDir(), "cloud.json")}
	for i := range 10 {
		cfg.Instances = append(cfg.Instances, fake.Instance{Name: fmt.Sprintf("node-%02d", i)})
	}
	c, other := newCloud(b, cfg), newCloud(b, cfg)
	nodes := []*v1.Node{mustNode(b, c, "i-1"), mustNode(b, c, "i-2")}
	lb, otherLB := lbOf(b, c), lbOf(b, other)
	ctx := b.Context()
	for i := range 10 {
		if _, err := lb.EnsureLoadBalancer(ctx, cluster, service(fmt.Sprintf("svc-%d", i)), nodes); err != nil {
			b.Fatal(err)
		}
	}
	svc := service("svc-0")
	b.Run("GetLoadBalancer", func(b *testing.B) {
		for b.Loop() {
			if _, ok, err := lb.GetLoadBalancer(ctx, cluster, svc); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("UpdateLoadBalancer", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if err := lb.UpdateLoadBalancer(ctx, cluster, svc, nodes[:1+i%2]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("GetLoadBalancerAfterOtherWrote", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if err := otherLB.UpdateLoadBalancer(ctx, cluster, svc, nodes[:1+i%2]); err != nil {
				b.Fatal(err)
			}
			if _, ok, err := lb.GetLoadBalancer(ctx, cluster, svc); !ok || err != nil {
				b.Fatal(ok, err)
			}
			i++
		}
	})
}

// TestStateFileRealistic: two processes on one state file (with one clock)
// agree on when a load balancer is provisioned and on its instance-ID
// backends: the file keeps when each load balancer is ready and what it
// keeps of its backends, and a process started later reads them back.
func TestStateFileRealistic(t *testing.T) {
	clk, withClock := newClock()
	cfg := fake.Config{Realistic: true, Instances: []fake.Instance{{Name: "vm-1"}, {Name: "vm-2"}}}
	cs, path := sharedClouds(t, cfg, 2, withClock)
	a, b := cs[0], cs[1]
	nodes := []*v1.Node{mustNode(t, a, "i-1"), mustNode(t, a, "i-2")}
	nodes[0].Name = "renamed" // not its instance's name
	svc := service("web")
	_, err := lbOf(t, a).EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
	if got := retryAfter(t, "EnsureLoadBalancer through a", err); got != realisticProvisioningDelay {
		t.Errorf("RetryAfter = %v; want %v", got, realisticProvisioningDelay)
	}
	if st, exists, err := lbOf(t, b).GetLoadBalancer(t.Context(), cluster, svc); err != nil || !exists || len(st.Ingress) != 0 {
		t.Errorf("GetLoadBalancer through b while provisioning = %+v, %v, %v; want exists without ingress", st, exists, err)
	}
	doc := readDoc(t, path)
	lbDoc := item(doc, "loadBalancers", 0)
	got := map[string]any{"format": doc["format"], "backends": doc["cloud"].(map[string]any)["loadBalancers"].(map[string]any)["backends"],
		"readyAt": lbDoc["readyAt"], "backendKey": lbDoc["backendKey"], "backend": item(lbDoc, "backends", 0), "ingress": len(lbDoc["ingress"].([]any))}
	want := map[string]any{"format": statefile.StateFormat, "backends": "instanceID", "readyAt": "2026-12-01T10:00:02Z", "backendKey": "ProviderID",
		"backend": map[string]any{"providerID": "fake://i-1"}, "ingress": 1}
	if diff := cmp.Diff(want, got, cmpModel); diff != "" {
		t.Errorf("state file (-want +got):\n%s", diff)
	}
	clk.Step(realisticProvisioningDelay)
	st, _, err := lbOf(t, b).GetLoadBalancer(t.Context(), cluster, svc)
	if err != nil || len(st.Ingress) != 1 {
		t.Fatalf("GetLoadBalancer through b after the delay = %+v, %v; want the address", st, err)
	}
	ensureFinds(t, b, svc, nodes, st, "both processes agree it is ready")
	later := newCloud(t, fake.Config{Realistic: true, Instances: cfg.Instances, StateFile: path}, withClock)
	if diff := cmp.Diff(a.Snapshot(), later.Snapshot(), cmpModel); diff != "" {
		t.Errorf("a process started later reads another cloud (-a +later):\n%s", diff)
	}
	if diff := cmp.Diff([]loadbalancer.Backend{{ProviderID: "fake://i-1"}, {ProviderID: "fake://i-2"}}, later.Snapshot().LoadBalancers[0].Spec.Backends, cmpModel); diff != "" {
		t.Errorf("backends read back (-want +got):\n%s", diff)
	}
}

// TestStateFileRejectsBadRoutes: a state file whose route table breaks the
// table's rules (routes[1] below; routes[0] is valid) is not loaded at
// all: New fails, and a running Cloud that finds it fails its calls and
// keeps the state last loaded, with an error naming the file, the route
// and the field. The file is left as it was.
func TestStateFileRejectsBadRoutes(t *testing.T) {
	valid := map[string]any{"cluster": cluster, "name": "r0", "destinationCIDR": "10.244.0.0/24", "targetNode": "node-01"}
	tests := []struct {
		name, reason string
		bad          map[string]any // routes[1], over a copy of valid with another name and destination
		want         []string
	}{
		{"destination not a CIDR", "every field the loader reads is checked",
			map[string]any{"destinationCIDR": "nope"}, []string{"routes[1].destinationCIDR", `"nope"`, "expected a CIDR"}},
		{"cluster default route", "not a pod route",
			map[string]any{"destinationCIDR": "0.0.0.0/0"}, []string{"routes[1].destinationCIDR", `"0.0.0.0/0"`}},
		{"IPv4-mapped destination", "IPv4 spelled as IPv4",
			map[string]any{"destinationCIDR": "::ffff:10.244.1.0/120"}, []string{"routes[1].destinationCIDR", "IPv4-mapped"}},
		{"overlapping destinations", "routes[1] contains routes[0]",
			map[string]any{"destinationCIDR": "10.244.0.0/16"}, []string{"routes[1].destinationCIDR", `contains "10.244.0.0/24"`, `route "r0"`}},
		{"repeated name", "(cluster, name) is unique",
			map[string]any{"name": "r0"}, []string{"routes[1].name", "duplicates routes[0].name"}},
		{"target node with NUL", "a Node name",
			map[string]any{"targetNode": "node\x0001"}, []string{"routes[1].targetNode", `"node\x0001"`}},
		{"address of an unknown type", "node address types are a closed set",
			map[string]any{"targetNodeAddresses": []any{map[string]any{"type": "Bogus", "address": "10.0.0.1"}}},
			[]string{"routes[1].targetNodeAddresses[0].type", `"Bogus"`}},
		{"address not an IP", "an InternalIP is an IP",
			map[string]any{"targetNodeAddresses": []any{map[string]any{"type": "InternalIP", "address": "node-01"}}},
			[]string{"routes[1].targetNodeAddresses[0].address", `"node-01"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, data := validStateFile(t)
			bad := map[string]any{"cluster": cluster, "name": "r1", "destinationCIDR": "10.244.1.0/24", "targetNode": "node-01"}
			for k, v := range tt.bad {
				bad[k] = v
			}
			good := edit(t, data, func(d map[string]any) { d["routes"] = []any{valid} })
			broken := edit(t, data, func(d map[string]any) { d["routes"] = []any{valid, bad} })
			want := append([]string{cfg.StateFile, `route "` + bad["name"].(string) + `"`}, tt.want...)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, fake.ErrStateFile) {
					t.Fatalf("%s = %v; want an error wrapping ErrStateFile (%s)", what, err, tt.reason)
				}
				for _, w := range want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s = %q; want it to name %q (%s)", what, err, w, tt.reason)
					}
				}
			}

			if err := os.WriteFile(cfg.StateFile, broken, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := openCloud(cfg, fake.Options{})
			check("New", err)

			// A running Cloud, then another process leaves the bad file.
			if err := os.WriteFile(cfg.StateFile, good, 0o600); err != nil {
				t.Fatal(err)
			}
			c := newCloud(t, cfg)
			before := c.Snapshot()
			if len(before.Routes) != 1 {
				t.Fatalf("the valid file loaded %d routes; want 1", len(before.Routes))
			}
			replaceFile(t, cfg.StateFile, broken)
			_, err = routesOf(t, c).ListRoutes(t.Context(), cluster)
			check("ListRoutes", err)
			if diff := cmp.Diff(before, c.Snapshot(), cmpModel); diff != "" {
				t.Errorf("Snapshot after the bad file (-before +after): want the state last loaded, nothing of the bad file\n%s", diff)
			}
			if got, _ := os.ReadFile(cfg.StateFile); string(got) != string(broken) {
				t.Errorf("the state file changed after the error; want it left as it was")
			}
		})
	}
}

// replaceFile replaces path with a new file holding data, as the fake and
// a careful person do.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
