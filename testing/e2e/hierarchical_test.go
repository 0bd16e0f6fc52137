package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/stack"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// Sizes and settings of TestHierarchicalCloudAtScale.
const (
	hierarchicalNodes    = 10
	hierarchicalServices = 50
	// hierarchicalAtOnce is how many Services each change of the scenario
	// changes at once.
	hierarchicalAtOnce = 10
	// hierarchicalBusy is how long the cloud of the changes keeps a load
	// balancer busy after each write: the fake's default
	// (fake.LoadBalancerSection.BusyAfterWrite), about Octavia's
	// PENDING_UPDATE.
	hierarchicalBusy = time.Second
	// hierarchicalBulkBusy is the busy window of the bulk bring-up alone.
	// With hierarchicalBusy, a Service's 9 writes take 3 Ensure calls of 3
	// writes each (loadbalancer.Options.MaxBusyWait 2s), each holding the
	// one worker of the service controller (--concurrent-service-syncs 1)
	// for 2 busy windows: 6s per Service, 300s for 50, too long for the
	// suite. At 100ms one Ensure call makes all 9 writes, waiting 0.8s.
	hierarchicalBulkBusy = 100 * time.Millisecond
	// certificateAnnotation is the fake's per-port certificate reference
	// (fake/annotations.go), kept in each listener's Settings.
	certificateAnnotation = "fake.ccmkit.io/certificate"
)

// hierarchicalCCM runs the example CCM with the upstream controllers only:
// drift-repair and orphan-collection would make passes at a random
// moment of their first period (housekeeping, every), whose cloud calls
// the counts below do not expect.
var hierarchicalCCM = ccm.Config{ExtraArgs: []string{"--controllers=*,-drift-repair,-orphan-collection"}}

// hierarchicalWorkers is the service controller's workers
// (--concurrent-service-syncs) for the changes: the default, 1, serves
// the Services of a change in turn, each holding the worker while the
// Reconciler waits a busy window out (Options.MaxBusyWait), so 10 port
// changes at once take 23-42s each. A CCM for a cloud that is busy after
// each write runs a worker per Service it changes at once (the README's
// hierarchical section says so).
const hierarchicalWorkers = hierarchicalAtOnce

// hierarchicalChangesCCM is hierarchicalCCM with hierarchicalWorkers.
var hierarchicalChangesCCM = ccm.Config{ExtraArgs: append(slices.Clone(hierarchicalCCM.ExtraArgs), fmt.Sprintf("--concurrent-service-syncs=%d", hierarchicalWorkers))}

// Service-controller log lines (k8s.io/cloud-provider@v0.37.2
// controllers/service/controller.go, at --v=2) that count the calls it
// makes to the load-balancer Reconciler: syncLoadBalancerIfNeeded before
// each EnsureLoadBalancer and before the EnsureLoadBalancerDeleted of a
// load balancer that exists (after a GetLoadBalancer), and
// nodeSyncService before each UpdateLoadBalancer.
const (
	logEnsuring = "Ensuring load balancer for service "
	logDeleting = "Deleting existing load balancer for service "
	logUpdating = "Updating backends for load balancer "
)

// stepBound is the bound of a change of steps writes on a cloud busy for
// busy after each write: steps × (busy + 1s), one busy window per write
// and a second for everything else (the service controller's requeue and
// its calls, the Reconciler's look-up, the test's polling).
func stepBound(steps int, busy time.Duration) time.Duration {
	return time.Duration(steps) * (busy + time.Second)
}

// The fewest writes of each change to a hierarchical load balancer of a
// Service with P ports on a cloud with Nodes (fake/hierarchical.go; the
// fake's TestHierarchicalThroughReconciler): a bring-up is the load
// balancer and, per port, a listener, its pool, the pool's members and
// its monitor (1 + 4P); a port change, the ports being immutable, removes
// the old pool and listener and makes the four objects of the new one
// (6); a certificate change updates one listener (1); a deletion deletes
// the load balancer with its children (1).
const (
	portChangeWrites  = 6
	certChangeWrites  = 1
	hierarchicalPorts = 2
	bringUpWrites     = 1 + 4*hierarchicalPorts
)

// TestHierarchicalCloudAtScale runs the example CCM against the fake cloud
// keeping each load balancer as a tree of objects, as OpenStack Octavia
// does (fake.LoadBalancerSection.Hierarchical: a listener, a pool, its
// members and a health monitor per port, each one write, and the load
// balancer busy after each write), through the real service controller.
// 10 Nodes come first, then 50 LoadBalancer Services at once, each with
// an http port 80 and an https port 443 (appProtocol https) whose
// certificate is cert-1 (fake.ccmkit.io/certificate "https=cert-1").
// Every Service gets its load balancer's VIP as ingress, and its tree
// holds two listeners, each with a pool of every Node and a monitor; the
// https one serves https with cert-1. Then, on the cloud busy 1s after
// each write, the port 80 of 10 Services becomes 8080 and the certificate
// of 10 others cert-2, each change made to its 10 Services at once, then
// once more to one Service alone. Deleting every Service leaves nothing of
// the cluster in the cloud.
//
// The cloud's write calls are counted by operation, against the fewest
// the changes need (bringUpWrites, portChangeWrites, certChangeWrites, one
// delete each) exactly; the writes the cloud refused because the load
// balancer was busy are counted apart; the load-balancer reads (Find and
// List) are at most one per call of the service controller to the
// Reconciler (each begins with one look-up, which the Reconciler's cache
// may answer). A change made to one Service alone converges within
// stepBound(its writes, 1s) of its update, alone or made to 10 at once
// (the CCM then runs hierarchicalWorkers service workers).
//
// The bring-up runs with a busy window of hierarchicalBulkBusy; the CCM is
// then restarted, over the same cloud (its state file), with the fake's
// default 1s, for the changes and the deletion.
func TestHierarchicalCloudAtScale(t *testing.T) {
	s := newScenario(t, "hierarchical")
	instances := fakecloud.Instances(s.name, hierarchicalNodes)
	cloud, _ := s.sharedCloud(fake.Config{Instances: instances, LoadBalancers: fake.LoadBalancerSection{Hierarchical: true}})
	bulk := cloud
	bulk.LoadBalancers.BusyAfterWrite = &provider.Duration{Duration: hierarchicalBulkBusy}
	c := s.startCCM("ccm-bulk", bulk, hierarchicalCCM)
	var nodes []string
	for _, in := range instances {
		nodes = append(nodes, in.Name)
	}
	s.createNodes(nodes, nil)
	s.waitNodesInitialized(nodes, initTimeout)
	admin := s.admin(c, initTimeout)

	h := &hierarchy{s: s, nodes: slices.Sorted(slices.Values(nodes)), want: map[string][]wantListener{}}
	h.bringUp(c, admin)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}

	c = s.startCCM("ccm", cloud, hierarchicalChangesCCM)
	admin = s.admin(c, initTimeout)
	h.settle(c, admin)
	h.busy = hierarchicalBusy
	svc := func(i int) string { return h.names[i-1] }
	var ports, certs []string
	for i := range hierarchicalAtOnce {
		ports = append(ports, svc(i+1))
		certs = append(certs, svc(hierarchicalAtOnce+i+1))
	}
	alonePort, aloneCert := svc(2*hierarchicalAtOnce+1), svc(2*hierarchicalAtOnce+2)
	h.change(c, admin, changePort, ports)
	h.change(c, admin, changeCertificate, certs)
	h.change(c, admin, changePort, []string{alonePort})
	h.change(c, admin, changeCertificate, []string{aloneCert})
	h.tearDown(c, admin)
}

// hierarchy is the state of TestHierarchicalCloudAtScale: its Nodes and
// Services, and the tree each Service's load balancer must have.
type hierarchy struct {
	s     *scenario
	nodes []string                  // sorted
	names []string                  // the Services, in creation order
	want  map[string][]wantListener // by Service name
	// busy is the busy window of the cloud of the running CCM.
	busy time.Duration
}

// wantListener is what one listener of a load balancer must be: its port,
// its app protocol and its certificate reference ("" for none). Every
// listener must moreover have a pool of every Node and a health monitor.
type wantListener struct {
	port                     int32
	appProtocol, certificate string
}

// hierarchicalService is a LoadBalancer Service with the ports of the
// scenario: http 80, and https 443 serving https with certificate cert-1.
func hierarchicalService(ns, name string) *corev1.Service {
	svc := workload.LoadBalancerService(ns, name, 80, 443)
	svc.Spec.Ports[0].Name = "http"
	svc.Spec.Ports[1].Name = "https"
	svc.Spec.Ports[1].AppProtocol = ptr.To("https")
	svc.Annotations = map[string]string{certificateAnnotation: "https=cert-1"}
	return svc
}

// hierarchicalTree is the tree of hierarchicalService's load balancer.
func hierarchicalTree() []wantListener {
	return []wantListener{{port: 80}, {port: 443, appProtocol: "https", certificate: "cert-1"}}
}

// change is one change of the scenario: what it is, the fewest writes
// it needs, and what it does to a Service and to the tree its load
// balancer must then have.
type change struct {
	what    string
	writes  int
	service func(*corev1.Service)
	tree    func([]wantListener)
}

// changePort makes the http port 8080.
var changePort = change{
	what:    "port 80 -> 8080",
	writes:  portChangeWrites,
	service: func(svc *corev1.Service) { svc.Spec.Ports[0].Port = 8080 },
	tree:    func(want []wantListener) { want[0].port = 8080 },
}

// changeCertificate makes the https port's certificate cert-2.
var changeCertificate = change{
	what:    "certificate cert-1 -> cert-2",
	writes:  certChangeWrites,
	service: func(svc *corev1.Service) { svc.Annotations[certificateAnnotation] = "https=cert-2" },
	tree:    func(want []wantListener) { want[1].certificate = "cert-2" },
}

// bringUp creates the Services at once, waits until each has its ingress
// and its load balancer's tree, and checks the writes by operation, the
// refused ones and the reads.
func (h *hierarchy) bringUp(c *stack.CCM, admin *fakecloud.Admin) {
	s := h.s
	h.busy = hierarchicalBulkBusy
	if err := admin.ResetCalls(s.t.Context()); err != nil {
		s.t.Fatal(err)
	}
	mark := h.mark(c)
	start := time.Now()
	created := map[string]time.Time{}
	for i := range hierarchicalServices {
		name := fmt.Sprintf("svc-%d", i+1)
		created[name] = time.Now()
		s.createService(hierarchicalService(s.ns, name))
		h.names = append(h.names, name)
		h.want[name] = hierarchicalTree()
	}
	took := h.waitTrees(admin, created, convergeTimeout)
	total := time.Since(start)
	calls := h.calls(admin)
	s.t.Logf("bring-up of %d services (%d ports each) on %d nodes, busy %v after each write: converged in %s; per service from its creation %s; %s",
		len(h.names), hierarchicalPorts, len(h.nodes), h.busy, total.Round(100*time.Millisecond), describeTimes(took), describeCalls(calls))
	h.checkCalls("bring-up", c, mark, calls, map[fake.Op]int64{fake.OpApplyLoadBalancer: int64(len(h.names) * bringUpWrites)})
}

// settle waits until the CCM started over the converged cloud has ensured
// every Service and its cloud calls have not moved for settleQuiet,
// checks that it wrote nothing, and resets the counters.
func (h *hierarchy) settle(c *stack.CCM, admin *fakecloud.Admin) {
	s := h.s
	var last fake.Calls
	var lastMoved time.Time
	s.poll(changeTimeout, fmt.Sprintf("the restarted CCM to ensure the %d services and its cloud calls to stop for %v", len(h.names), settleQuiet), func(ctx context.Context) (bool, string) {
		calls, err := admin.Calls(ctx)
		if err != nil {
			return false, err.Error()
		}
		if calls.Reads != last.Reads || calls.Writes != last.Writes || lastMoved.IsZero() {
			last, lastMoved = calls, time.Now()
		}
		ensured := s.countLog(c.LogPath(), logEnsuring+s.ns+"/")
		return ensured >= len(h.names) && time.Since(lastMoved) >= settleQuiet, fmt.Sprintf("%d Ensure calls; %s", ensured, describeCalls(calls))
	})
	s.t.Logf("restart over the converged cloud: %s", describeCalls(last))
	if last.Writes != 0 {
		s.t.Errorf("the restarted CCM wrote to the converged cloud (%s); want no write", describeCalls(last))
	}
	if err := admin.ResetCalls(s.t.Context()); err != nil {
		s.t.Fatal(err)
	}
}

// settleQuiet is how long the cloud calls of a restarted CCM must not
// move for settle to take its start-up as done: its service controller
// ensures every Service (one call each, in turn) and its node sync may
// update each, within milliseconds of one another over a converged cloud.
const settleQuiet = 2 * time.Second

// change makes ch to the named Services at once, waits until each one's
// load balancer has the new tree, and checks how long each took from its
// update (within stepBound(ch.writes, h.busy), each Service having a
// worker of its own: hierarchicalWorkers) and the
// writes (exactly ch.writes per Service).
func (h *hierarchy) change(c *stack.CCM, admin *fakecloud.Admin, ch change, names []string) {
	s := h.s
	if err := admin.ResetCalls(s.t.Context()); err != nil {
		s.t.Fatal(err)
	}
	mark := h.mark(c)
	bound := stepBound(ch.writes, h.busy)
	updated := map[string]time.Time{}
	for _, name := range names {
		updated[name] = time.Now()
		s.updateService(name, ch.service)
		ch.tree(h.want[name])
	}
	took := h.waitTrees(admin, updated, changeTimeout+bound)
	calls := h.calls(admin)
	what := fmt.Sprintf("%s on %d service(s) at once", ch.what, len(names))
	s.t.Logf("%s, busy %v after each write, %d service workers: per service from its update %s (bound %v: %d × (%v + 1s)); %s",
		what, h.busy, hierarchicalWorkers, describeTimes(took), bound, ch.writes, h.busy, describeCalls(calls))
	for _, name := range names {
		if took[name] > bound {
			s.t.Errorf("%s: service %s converged %v after its update; want within %v (%d × (%v + 1s))", what, name, took[name].Round(10*time.Millisecond), bound, ch.writes, h.busy)
		}
	}
	h.checkCalls(what, c, mark, calls, map[fake.Op]int64{fake.OpApplyLoadBalancer: int64(len(names) * ch.writes)})
}

// tearDown deletes every Service, waits until the cloud holds nothing of
// the cluster and every Service is gone, and checks the writes: one delete
// per load balancer, its children with it.
func (h *hierarchy) tearDown(c *stack.CCM, admin *fakecloud.Admin) {
	s := h.s
	if err := admin.ResetCalls(s.t.Context()); err != nil {
		s.t.Fatal(err)
	}
	mark := h.mark(c)
	start := time.Now()
	s.deleteServices(admin, convergeTimeout, h.names)
	took := time.Since(start)
	s.checkVIPsReleased(admin, "every Service was deleted")
	calls := h.calls(admin)
	s.t.Logf("tear-down of %d services done in %s; %s", len(h.names), took.Round(100*time.Millisecond), describeCalls(calls))
	h.checkCalls("tear-down", c, mark, calls, map[fake.Op]int64{fake.OpDeleteLoadBalancer: int64(len(h.names))})
}

// logMark counts the service controller's calls to the Reconciler for
// the scenario's Services, from its log (logEnsuring, logDeleting,
// logUpdating).
type logMark struct{ ensures, deletes, updates int }

func (h *hierarchy) mark(c *stack.CCM) logMark {
	count := func(line string) int { return h.s.countLog(c.LogPath(), line+h.s.ns+"/") }
	return logMark{ensures: count(logEnsuring), deletes: count(logDeleting), updates: count(logUpdating)}
}

// calls returns the cloud calls so far.
func (h *hierarchy) calls(admin *fakecloud.Admin) fake.Calls {
	calls, err := admin.Calls(h.s.t.Context())
	if err != nil {
		h.s.t.Fatal(err)
	}
	return calls
}

// checkCalls checks the cloud calls of one step of the scenario (since
// the counters were reset and the log marked at since): the writes the
// cloud took (its write calls less those it refused as busy), by
// operation, must be exactly want; the refused ones are reported; and
// the load-balancer reads must be at most one per call of the service
// controller to the Reconciler (two per deletion: GetLoadBalancer, then
// EnsureLoadBalancerDeleted), none of which the Nodes caused (they were
// registered first: no UpdateLoadBalancer).
func (h *hierarchy) checkCalls(what string, c *stack.CCM, since logMark, calls fake.Calls, want map[fake.Op]int64) {
	s := h.s
	now := h.mark(c)
	ensures, deletes, updates := now.ensures-since.ensures, now.deletes-since.deletes, now.updates-since.updates
	took := map[fake.Op]int64{}
	for op, n := range calls.ByOp {
		if op.Writes() {
			took[op] = n - calls.BusyByOp[op]
		}
	}
	for op, n := range want {
		if took[op] != n {
			s.t.Errorf("%s: the cloud took %d %s writes; want %d, the fewest", what, took[op], op, n)
		}
	}
	for op, n := range took {
		if _, ok := want[op]; !ok && n != 0 {
			s.t.Errorf("%s: the cloud took %d %s writes; want none", what, n, op)
		}
	}
	lbReads := calls.ByOp[fake.OpFindLoadBalancers] + calls.ByOp[fake.OpListLoadBalancers]
	reconcilerCalls := ensures + 2*deletes + updates
	s.t.Logf("%s: writes taken %v against the fewest %v; %d refused as busy %v; %d load-balancer reads (Find %d, List %d) for %d service-controller calls to the Reconciler (%d Ensure, %d Delete, %d Update); %d other reads",
		what, took, want, calls.Busy, calls.BusyByOp, lbReads, calls.ByOp[fake.OpFindLoadBalancers], calls.ByOp[fake.OpListLoadBalancers],
		reconcilerCalls, ensures, deletes, updates, calls.Reads-lbReads)
	if lbReads > int64(reconcilerCalls) {
		s.t.Errorf("%s: %d load-balancer reads for %d service-controller calls to the Reconciler; want at most one each", what, lbReads, reconcilerCalls)
	}
	if updates != 0 {
		s.t.Errorf("%s: %d UpdateLoadBalancer calls; want none, the Nodes did not change", what, updates)
	}
}

// waitTrees waits until the load balancer of each Service of since (the
// moment it was created or changed) has the tree h.want holds for it and
// the Service its VIP as ingress, and returns how long after since each
// was first seen so.
func (h *hierarchy) waitTrees(admin *fakecloud.Admin, since map[string]time.Time, timeout time.Duration) map[string]time.Duration {
	s := h.s
	took := map[string]time.Duration{}
	s.poll(timeout, fmt.Sprintf("the load balancers of %d services to hold their trees", len(since)), func(ctx context.Context) (bool, string) {
		lbs, err := admin.LoadBalancers(ctx)
		if err != nil {
			return false, err.Error()
		}
		svcs, err := s.client.CoreV1().Services(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		now := time.Now()
		var problems []string
		for i := range svcs.Items {
			svc := &svcs.Items[i]
			if _, ok := since[svc.Name]; !ok {
				continue
			}
			if _, done := took[svc.Name]; done {
				continue
			}
			if p := h.treeProblem(svc, lbsOf(lbs, svc.UID)); p != "" {
				problems = append(problems, p)
				continue
			}
			took[svc.Name] = now.Sub(since[svc.Name])
		}
		if n := len(s.ours(lbs)); n != len(h.names) {
			problems = append(problems, fmt.Sprintf("the cloud has %d load balancers of this cluster, want %d", n, len(h.names)))
		}
		slices.Sort(problems)
		return len(took) == len(since) && len(problems) == 0,
			fmt.Sprintf("%d/%d converged; %s", len(took), len(since), strings.Join(problems[:min(len(problems), 5)], "; "))
	})
	return took
}

// treeProblem says what svc and its load balancers (mine) lack of the
// tree h.want holds for it, or "" when they have it: one load balancer
// whose VIPs are the Service's ingress, with exactly the wanted
// listeners, each with its app protocol, certificate and a pool of every
// Node (by name) with a monitor.
func (h *hierarchy) treeProblem(svc *corev1.Service, mine []fake.LoadBalancer) string {
	if len(mine) != 1 {
		return fmt.Sprintf("service %s: %s", svc.Name, describeLBs(mine))
	}
	lb := mine[0]
	if ingress := workload.IngressIPs(svc); len(ingress) == 0 || !slices.Equal(ingress, lb.VIPs) {
		return fmt.Sprintf("service %s: ingress %v, its load balancer %s VIPs %v", svc.Name, ingress, lb.ID, lb.VIPs)
	}
	want := h.want[svc.Name]
	if len(lb.Spec.Listeners) != len(want) {
		return fmt.Sprintf("service %s: load balancer %s has %d listeners, want %d", svc.Name, lb.ID, len(lb.Spec.Listeners), len(want))
	}
	for _, w := range want {
		i := slices.IndexFunc(lb.Spec.Listeners, func(l loadbalancer.Listener) bool { return l.Port == w.port })
		if i < 0 {
			return fmt.Sprintf("service %s: load balancer %s has no listener on port %d (listeners %v)", svc.Name, lb.ID, w.port, listenerPorts(lb))
		}
		l := lb.Spec.Listeners[i]
		switch {
		case l.AppProtocol != w.appProtocol || l.Settings[certificateAnnotation] != w.certificate:
			return fmt.Sprintf("service %s: listener %d serves %q with certificate %q, want %q with %q", svc.Name, w.port, l.AppProtocol, l.Settings[certificateAnnotation], w.appProtocol, w.certificate)
		case l.ID == "" || l.Pool == nil || l.Pool.ID == "":
			return fmt.Sprintf("service %s: listener %d (id %q) has pool %+v, want one with an ID", svc.Name, w.port, l.ID, l.Pool)
		case l.Pool.HealthCheck == nil:
			return fmt.Sprintf("service %s: listener %d's pool %s has no health monitor", svc.Name, w.port, l.Pool.ID)
		}
		var members []string
		for _, b := range l.Pool.Backends {
			members = append(members, b.NodeName)
		}
		if slices.Sort(members); !slices.Equal(members, h.nodes) {
			return fmt.Sprintf("service %s: listener %d's pool %s has members %v, want the nodes %v", svc.Name, w.port, l.Pool.ID, members, h.nodes)
		}
	}
	return ""
}

// describeTimes summarizes per-Service durations: the fastest, the
// median and the slowest, with the Services of the first and the last,
// and every one when there are at most 10.
func describeTimes(took map[string]time.Duration) string {
	names := slices.SortedFunc(maps.Keys(took), func(a, b string) int { return int(took[a] - took[b]) })
	if len(names) == 0 {
		return "none"
	}
	r := func(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
	if len(names) <= 10 {
		var parts []string
		for _, n := range names {
			parts = append(parts, n+" "+r(took[n]))
		}
		return strings.Join(parts, ", ")
	}
	first, last := names[0], names[len(names)-1]
	return fmt.Sprintf("fastest %s (%s), median %s, slowest %s (%s)", r(took[first]), first, r(took[names[len(names)/2]]), r(took[last]), last)
}
