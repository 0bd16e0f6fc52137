package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/internal/proc"
	"github.com/ccmkit/ccmkit/testing/e2e/stack"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// scenarioLabel marks the Nodes a scenario created, so that its cleanup
// finds them.
const scenarioLabel = "e2e.ccmkit.io/scenario"

// Timeouts of the waits. They are generous (2 shared cores, -race), and a
// wait that times out says what it waited for and what it saw last.
const (
	// initTimeout bounds a Node's initialization or a Service's first
	// ingress by a running CCM.
	initTimeout = 90 * time.Second
	// changeTimeout bounds the CCM's reaction to a change.
	changeTimeout = 60 * time.Second
	// takeoverTimeout bounds a standby's takeover after the leader dies:
	// the lease duration (4s) plus start-up of the controllers.
	takeoverTimeout = 90 * time.Second
)

// scenario is one test's slice of the shared control plane: a namespace,
// Nodes labelled with its name, its own CCM processes and fake clouds.
type scenario struct {
	t      *testing.T
	name   string
	ns     string
	client kubernetes.Interface
	dir    string
}

// newScenario skips under -short, fails if the shared setup failed, and
// creates the scenario's namespace. Its cleanup (registered first, so it runs
// after the CCMs are stopped) deletes the scenario's Services (removing any
// finalizer left) and Nodes, so that the next scenario's CCM never sees them.
func newScenario(t *testing.T, name string) *scenario {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this scenario needs etcd, kube-apiserver and the example CCM")
	}
	if shared.setupErr != nil {
		t.Fatalf("shared setup failed: %v", shared.setupErr)
	}
	name = runName(name)
	s := &scenario{t: t, name: name, ns: "e2e-" + name, client: shared.client, dir: t.TempDir()}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}
	if _, err := s.client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", s.ns, err)
	}
	t.Cleanup(s.cleanup)
	return s
}

// scenarioRuns counts the runs of each scenario in this process.
var scenarioRuns struct {
	sync.Mutex
	n map[string]int
}

// runName returns name for a scenario's first run in this process and
// name-r<N> for its Nth (go test -count=N), so that every run has its own
// namespace, Node label, cluster name and Lease on the shared control
// plane.
func runName(name string) string {
	scenarioRuns.Lock()
	defer scenarioRuns.Unlock()
	if scenarioRuns.n == nil {
		scenarioRuns.n = map[string]int{}
	}
	scenarioRuns.n[name]++
	if n := scenarioRuns.n[name]; n > 1 {
		return fmt.Sprintf("%s-r%d", name, n)
	}
	return name
}

func (s *scenario) cleanup() {
	// t.Context() is already canceled in cleanups.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svcs, err := s.client.CoreV1().Services(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Errorf("cleanup: listing services: %v", err)
		svcs = &corev1.ServiceList{}
	}
	for _, svc := range svcs.Items {
		if len(svc.Finalizers) > 0 {
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			if _, err := s.client.CoreV1().Services(s.ns).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				s.t.Errorf("cleanup: removing finalizers of service %s: %v", svc.Name, err)
			}
		}
		if err := s.client.CoreV1().Services(s.ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			s.t.Errorf("cleanup: deleting service %s: %v", svc.Name, err)
		}
	}
	sel := metav1.ListOptions{LabelSelector: scenarioLabel + "=" + s.name}
	if err := s.client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		s.t.Errorf("cleanup: deleting nodes: %v", err)
	}
}

// startCCM starts the example CCM with cloud as its fake cloud
// (stack.StartCCM), filling in the binary, the admin kubeconfig (unless cfg
// has one), --cluster-name=<scenario> and a Lease of the scenario's own. Its
// cleanup stops the process, checks that no process of its group is left,
// and logs the tail of its log if the test failed.
func (s *scenario) startCCM(name string, cloud fake.Config, cfg ccm.Config) *stack.CCM {
	s.t.Helper()
	cloud.ClusterID = s.clusterID(cloud)
	cfg.Binary = shared.ccmBinary
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = shared.cp.KubeconfigPath()
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = s.name
	}
	if cfg.LeaseName == "" {
		cfg.LeaseName = "e2e-" + s.name
	}
	c, err := stack.StartCCM(s.dir, name, cloud, cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			s.t.Errorf("stopping %s: %v", name, err)
		}
		if proc.Alive(c.PID()) || proc.GroupAlive(c.PID()) {
			s.t.Errorf("CCM %s (pid %d) still alive after Stop", name, c.PID())
		}
		// The CCM is built with -race: a data race in ccmkit's code (or
		// upstream's, but for the known upstream races listed in package
		// ccm) under the real controllers fails the scenario.
		if r := c.RaceReport(); r != "" {
			s.t.Errorf("CCM %s hit a data race:\n%s", name, r)
		}
		if s.t.Failed() {
			s.t.Logf("last lines of %s's log (%s):\n%s", name, c.LogPath(), c.LogTail(60))
		}
	})
	return c
}

// clusterID is the cluster ID a scenario's fake cloud runs with: the
// cloud-config's (fake.Config.ClusterID), else the scenario's name. It owns
// the load balancers and routes the scenario's CCMs make.
func (s *scenario) clusterID(cloud fake.Config) string {
	if cloud.ClusterID != "" {
		return cloud.ClusterID
	}
	return s.name
}

// admin waits for the CCM's fake cloud to serve its admin endpoint (which
// it does once the CCM has initialized the cloud: at start-up, or on
// becoming leader) and returns a client for it.
func (s *scenario) admin(c *stack.CCM, timeout time.Duration) *fakecloud.Admin {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), timeout)
	defer cancel()
	a, err := c.Admin(ctx)
	if err != nil {
		s.t.Fatalf("after %s: %v", timeout, err)
	}
	return a
}

// sharedCloud returns a cloud-config like cloud whose state lives in the
// scenario's state file (fake.Config.StateFile), so that every CCM started
// with it shares one cloud, and this process's view of that cloud (which
// creates the file if needed).
func (s *scenario) sharedCloud(cloud fake.Config) (fake.Config, *fakecloud.Shared) {
	s.t.Helper()
	cloud.ClusterID = s.clusterID(cloud)
	cloud.StateFile = filepath.Join(s.dir, "cloud.json")
	view, err := fakecloud.OpenShared(cloud)
	if err != nil {
		s.t.Fatal(err)
	}
	return cloud, view
}

// addForeignLB creates, in the shared cloud, the load balancer of a Service
// of another cluster, which the scenario's CCMs must never touch: a peer of
// the view (fake.NewPeer) whose cluster ID is "other-<scenario>", called
// with the scenario's own cluster name, as two clusters that both keep one
// --cluster-name would be (the cluster ID owns load balancers, not the
// cluster name). Created before any CCM runs, it also moves the cloud's
// next load-balancer ID and VIP, so that a CCM that did not use the shared
// cloud would hand out other ones. It returns the load balancer, owned
// (loadbalancer.TagCluster) by the other cluster.
func (s *scenario) addForeignLB(view *fakecloud.Shared) fake.LoadBalancer {
	s.t.Helper()
	svc := workload.LoadBalancerService("elsewhere", "foreign", 80)
	svc.UID = types.UID("foreign-" + s.name)
	svc.Spec.Ports[0].NodePort = 30999
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	return s.addOtherClusterLB(view, svc)
}

// addOtherClusterLB creates, in the shared cloud, svc's load balancer as
// another cluster makes it: a peer of the view (fake.NewPeer) whose
// cluster ID is "other-<scenario>", called with the scenario's own cluster
// name. A realistic cloud answers "come back" (an api.RetryError) while it
// provisions; the load balancer exists then. It returns the load balancer,
// owned (loadbalancer.TagCluster) by the other cluster.
func (s *scenario) addOtherClusterLB(view *fakecloud.Shared, svc *corev1.Service) fake.LoadBalancer {
	s.t.Helper()
	other, err := fake.NewPeer(view.Cloud, "other-"+s.name, fake.PeerOptions{})
	if err != nil {
		s.t.Fatalf("another cluster over the shared cloud: %v", err)
	}
	lbs, _ := other.LoadBalancer()
	var provisioning *api.RetryError
	if _, err := lbs.EnsureLoadBalancer(s.t.Context(), s.name, svc, nil); err != nil && !errors.As(err, &provisioning) {
		s.t.Fatalf("creating another cluster's load balancer for %s/%s in the shared cloud: %v", svc.Namespace, svc.Name, err)
	}
	lb, ok := other.LoadBalancerFor(s.name, svc)
	if !ok {
		s.t.Fatal("the other cluster's load balancer is not in the shared cloud")
	}
	if got, want := lb.Tags[loadbalancer.TagCluster], "other-"+s.name; got != want {
		s.t.Fatalf("the other cluster's load balancer %s is owned by cluster %q, want %q", lb.ID, got, want)
	}
	return lb
}

// checkUnchanged fails the test unless lbs hold want exactly as it was
// (another cluster's load balancer, one without ccmkit's tags: what the
// scenario's CCMs must never touch).
func (s *scenario) checkUnchanged(lbs []fake.LoadBalancer, want fake.LoadBalancer) {
	s.t.Helper()
	i := slices.IndexFunc(lbs, func(lb fake.LoadBalancer) bool { return lb.ID == want.ID })
	if i < 0 {
		s.t.Errorf("load balancer %s (%s, tags %v) is gone from the cloud", want.ID, want.Name, want.Tags)
		return
	}
	if diff := cmp.Diff(want, lbs[i], equateAddrs); diff != "" {
		s.t.Errorf("load balancer %s (%s, tags %v) changed (-before +after):\n%s", want.ID, want.Name, want.Tags, diff)
	}
}

// ours returns the load balancers of the scenario's cluster: owned
// (loadbalancer.TagCluster) by the cluster ID the scenario's clouds run
// with unless their cloud-config sets another (see clusterID).
func (s *scenario) ours(lbs []fake.LoadBalancer) []fake.LoadBalancer {
	return lbsTagged(lbs, loadbalancer.TagCluster, s.name)
}

// startWithNodes starts a CCM named "ccm" whose fake cloud has n instances
// <prefix>-1..n (IDs i-<prefix>-1..n, see fakecloud.Instances), creates
// their Nodes, waits until they are initialized and returns the CCM, its
// cloud's admin client and the node names.
func (s *scenario) startWithNodes(prefix string, n int, cfg ccm.Config) (*stack.CCM, *fakecloud.Admin, []string) {
	s.t.Helper()
	c := s.startCCM("ccm", fake.Config{Instances: fakecloud.Instances(prefix, n)}, cfg)
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("%s-%d", prefix, i+1))
	}
	s.createNodes(names, nil)
	s.waitNodesInitialized(names, initTimeout)
	return c, s.admin(c, initTimeout), names
}

// poll waits for cond (see workload.Poll) and fails the test with what it
// waited for if it times out.
func (s *scenario) poll(timeout time.Duration, what string, cond func(context.Context) (bool, string)) {
	s.t.Helper()
	if err := workload.Poll(s.t.Context(), timeout, what, cond); err != nil {
		s.t.Fatal(err)
	}
}

// createNodes creates Nodes as kubelets with --cloud-provider=external
// register them, labelled with the scenario's name.
func (s *scenario) createNodes(names []string, opts func(i int) workload.NodeOptions) {
	s.t.Helper()
	for i, name := range names {
		var o workload.NodeOptions
		if opts != nil {
			o = opts(i)
		}
		labels := map[string]string{}
		maps.Copy(labels, o.Labels)
		labels[scenarioLabel] = s.name
		o.Labels = labels
		if _, err := s.client.CoreV1().Nodes().Create(s.t.Context(), workload.Node(name, o), metav1.CreateOptions{}); err != nil {
			s.t.Fatalf("creating node %s: %v", name, err)
		}
	}
}

// node returns the current Node or fails the test.
func (s *scenario) node(name string) *corev1.Node {
	s.t.Helper()
	n, err := s.client.CoreV1().Nodes().Get(s.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatalf("getting node %s: %v", name, err)
	}
	return n
}

// waitNodesInitialized waits until every named Node has a providerID and no
// uninitialized taint.
func (s *scenario) waitNodesInitialized(names []string, timeout time.Duration) {
	s.t.Helper()
	s.poll(timeout, fmt.Sprintf("nodes %v to be initialized (providerID and addresses set, taint %s removed)", names, workload.UninitializedTaint),
		func(ctx context.Context) (bool, string) {
			var pending []string
			for _, name := range names {
				n, err := s.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					pending = append(pending, fmt.Sprintf("%s: %v", name, err))
				} else if !workload.Initialized(n) {
					pending = append(pending, workload.DescribeNode(n))
				}
			}
			return len(pending) == 0, strings.Join(pending, "; ")
		})
}

// createService creates a LoadBalancer Service in the scenario's namespace.
func (s *scenario) createService(svc *corev1.Service) *corev1.Service {
	s.t.Helper()
	got, err := s.client.CoreV1().Services(s.ns).Create(s.t.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatalf("creating service %s: %v", svc.Name, err)
	}
	return got
}

// service returns the current Service or fails the test.
func (s *scenario) service(name string) *corev1.Service {
	s.t.Helper()
	svc, err := s.client.CoreV1().Services(s.ns).Get(s.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatalf("getting service %s: %v", name, err)
	}
	return svc
}

// updateService applies mutate to the current Service and updates it,
// retrying on conflicts (the CCM writes the same object).
func (s *scenario) updateService(name string, mutate func(*corev1.Service)) *corev1.Service {
	s.t.Helper()
	for attempt := 0; ; attempt++ {
		svc := s.service(name)
		mutate(svc)
		got, err := s.client.CoreV1().Services(s.ns).Update(s.t.Context(), svc, metav1.UpdateOptions{})
		if err == nil {
			return got
		}
		if !apierrors.IsConflict(err) || attempt > 10 {
			s.t.Fatalf("updating service %s: %v", name, err)
		}
	}
}

// waitIngress waits until the Service has at least one ingress entry and
// returns it.
func (s *scenario) waitIngress(name string, timeout time.Duration) *corev1.Service {
	s.t.Helper()
	var svc *corev1.Service
	s.poll(timeout, fmt.Sprintf("service %s/%s to get a load-balancer ingress", s.ns, name), func(ctx context.Context) (bool, string) {
		got, err := s.client.CoreV1().Services(s.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		svc = got
		return len(got.Status.LoadBalancer.Ingress) > 0, workload.DescribeService(got)
	})
	return svc
}

// lbsOf returns the load balancers of the cloud owned by the Service with
// this UID (ownership tag loadbalancer.TagServiceUID).
func lbsOf(lbs []fake.LoadBalancer, uid types.UID) []fake.LoadBalancer {
	return lbsTagged(lbs, loadbalancer.TagServiceUID, string(uid))
}

// lbsTagged returns the load balancers whose tag key has this value.
func lbsTagged(lbs []fake.LoadBalancer, key, value string) []fake.LoadBalancer {
	var out []fake.LoadBalancer
	for _, lb := range lbs {
		if lb.Tags[key] == value {
			out = append(out, lb)
		}
	}
	return out
}

// describeLBs is a short summary of load balancers for failure messages.
func describeLBs(lbs []fake.LoadBalancer) string {
	var parts []string
	for _, lb := range lbs {
		parts = append(parts, fmt.Sprintf("{%s %s tags=%v listeners=%v backends=%d hc=%+v vips=%v}",
			lb.ID, lb.Name, lb.Tags, lb.Spec.Listeners, len(lb.Spec.Backends), lb.Spec.HealthCheck, lb.VIPs))
	}
	return fmt.Sprintf("%d load balancers %s", len(lbs), strings.Join(parts, " "))
}

// equateAddrs compares two readings of the fake's load balancers (the
// loadbalancer model): netip values by value, and an empty list as no list,
// since a load balancer read back through JSON omits empty ones.
var equateAddrs = cmp.Options{cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}), cmpopts.EquateEmpty()}
