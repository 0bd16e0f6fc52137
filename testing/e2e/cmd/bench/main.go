package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/controlplane"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/stack"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

const (
	benchLabel = "bench.e2e.ccmkit.io/run"
	namespace  = "bench"
)

type options struct {
	nodes, services, runs   int
	serviceSyncs, nodeSyncs int
	qps, burst              int
	timeout                 time.Duration
	sharedPools, governed   bool
	routeListTTL            time.Duration
	coalesceWindow          time.Duration
	uniqueNames             bool
}

// cloudConfig is the fake's cloud-config of one run with prefix.
func (o options) cloudConfig(prefix string) fake.Config {
	cfg := fake.Config{ClusterID: "bench", Instances: fakecloud.Instances(prefix, o.nodes)}
	if o.sharedPools {
		cfg.LoadBalancers.BackendPools = fake.BackendPoolsShared
	}
	if o.governed {
		cfg.Governor = &fake.GovernorSection{}
	}
	cfg.Routes.ListTTL.Duration = o.routeListTTL
	cfg.LoadBalancers.CoalesceWindow = &provider.Duration{Duration: o.coalesceWindow}
	cfg.LoadBalancers.UniqueNames = o.uniqueNames
	return cfg
}

func main() {
	var o options
	flag.IntVar(&o.nodes, "nodes", 100, "Nodes (and cloud instances) to create")
	flag.IntVar(&o.services, "services", 100, "LoadBalancer Services to create")
	flag.IntVar(&o.runs, "runs", 1, "runs, each with a fresh CCM and cloud; the median is reported")
	flag.IntVar(&o.serviceSyncs, "concurrent-service-syncs", 0, "the CCM's --concurrent-service-syncs (0: upstream default, 1)")
	flag.IntVar(&o.nodeSyncs, "concurrent-node-syncs", 0, "the CCM's --concurrent-node-syncs (0: upstream default, 1)")
	flag.IntVar(&o.qps, "kube-api-qps", 0, "the CCM's --kube-api-qps (0: upstream default, 20)")
	flag.IntVar(&o.burst, "kube-api-burst", 0, "the CCM's --kube-api-burst (0: upstream default, 30)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long one run may take to converge")
	flag.BoolVar(&o.sharedPools, "shared-pools", false, "the fake's load balancers share backend pools (cloud-config loadBalancers.backendPools: shared)")
	flag.DurationVar(&o.routeListTTL, "route-list-ttl", 0, "the fake's routes.listTTL: ListRoutes answered from its last answer for this long (0: none)")
	flag.DurationVar(&o.coalesceWindow, "coalesce-window", loadbalancer.RecommendedCoalesceWindow, "the fake's loadBalancers.coalesceWindow, as example/cloud-config.yaml sets it (0: each UpdateLoadBalancer writes)")
	flag.BoolVar(&o.uniqueNames, "unique-names", true, "the fake's loadBalancers.uniqueNames, as example/cloud-config.yaml sets it: the cloud refuses a second load balancer of one name, and creates need no confirming Find")
	flag.BoolVar(&o.governed, "governor", false, "the fake's provider has a client-side budget with the governor's defaults (cloud-config governor: {})")
	flag.Parse()
	if o.nodes < 1 || o.services < 0 || o.runs < 1 {
		fmt.Fprintf(os.Stderr, "bench: -nodes=%d -services=%d -runs=%d: want nodes ≥ 1, services ≥ 0, runs ≥ 1\n", o.nodes, o.services, o.runs)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type result struct {
	create, nodes, services, total time.Duration
	backends                       time.Duration // every load balancer's backends are every Node
	fullBackends                   int
	calls                          fake.Calls
	usage                          usage // the CCM process's, from creating the objects to the end
}

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "ccmkit-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Printf("ccmkit e2e benchmark: %d nodes and %d LoadBalancer services created at once; example CCM with the fake cloud\n", o.nodes, o.services)
	cp, err := controlplane.Start(ctx, controlplane.Config{Progress: os.Stderr})
	if err != nil {
		return err
	}
	defer cp.Stop()
	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return err
	}
	bin, err := ccm.Build(ctx, dir, ccm.BuildOptions{})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	var results []result
	for i := 1; i <= o.runs; i++ {
		r, err := runOnce(ctx, o, i, client, cp, bin, dir)
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		fmt.Printf("run %d: nodes initialized %s, services with ingress %s, both %s (creating the objects took %s); load balancers with every node as backend: %d/%d at %s; cloud API calls: %d reads, %d writes, %d in all\n",
			i, r.nodes.Round(time.Millisecond), r.services.Round(time.Millisecond), r.total.Round(time.Millisecond), r.create.Round(time.Millisecond),
			r.fullBackends, o.services, r.backends.Round(time.Millisecond), r.calls.Reads, r.calls.Writes, r.calls.Reads+r.calls.Writes)
		fmt.Printf("run %d: calls by operation: %s\n", i, byOp(r.calls))
		fmt.Printf("run %d: CCM process: %s\n", i, r.usage)
		results = append(results, r)
	}
	med := func(f func(result) time.Duration) time.Duration {
		var ds []time.Duration
		for _, r := range results {
			ds = append(ds, f(r))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	fmt.Printf("median of %d: nodes %s, services %s, both %s\n", len(results),
		med(func(r result) time.Duration { return r.nodes }).Round(time.Millisecond),
		med(func(r result) time.Duration { return r.services }).Round(time.Millisecond),
		med(func(r result) time.Duration { return r.total }).Round(time.Millisecond))
	args := []string{fmt.Sprintf("-nodes %d -services %d -runs %d", o.nodes, o.services, o.runs)}
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "nodes" && f.Name != "services" && f.Name != "runs" {
			args = append(args, fmt.Sprintf("-%s %s", f.Name, f.Value))
		}
	})
	fmt.Printf("command: cd testing/e2e && go run ./cmd/bench %s\n", strings.Join(args, " "))
	return nil
}

func runOnce(ctx context.Context, o options, run int, client kubernetes.Interface, cp *controlplane.ControlPlane, bin, dir string) (res result, err error) {
	prefix := fmt.Sprintf("r%d", run)
	c, err := stack.StartCCM(dir, "ccm-"+prefix, o.cloudConfig(prefix), ccm.Config{
		Binary: bin, Kubeconfig: cp.KubeconfigPath(), ClusterName: "bench",
		ConcurrentServiceSyncs: o.serviceSyncs, ConcurrentNodeSyncs: o.nodeSyncs, KubeAPIQPS: o.qps, KubeAPIBurst: o.burst,
		// Quiet: logging 100s of lines per second at --v=2 costs CPU that
		// the measurement would include.
		Verbosity: 1,
	})
	if err != nil {
		return res, err
	}
	defer func() {
		c.Stop()
		if cerr := cleanup(client, prefix); cerr != nil && err == nil {
			err = cerr
		}
	}()
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	admin, err := c.Admin(actx)
	cancel()
	if err != nil {
		return res, err
	}
	// The admin endpoint comes up in Initialize, just before the
	// controllers start and sync their informers: give them a moment so
	// that the clock measures reconciling, not start-up.
	time.Sleep(2 * time.Second)
	if err := admin.ResetCalls(ctx); err != nil {
		return res, err
	}

	meter, err := sample(c.Usage)
	if err != nil {
		return res, err
	}
	start := time.Now()
	var nodeNames []string
	for i := range o.nodes {
		nodeNames = append(nodeNames, fmt.Sprintf("%s-%d", prefix, i+1))
	}
	err = parallel(8, len(nodeNames)+o.services, func(i int) error {
		if i < len(nodeNames) {
			n := workload.Node(nodeNames[i], workload.NodeOptions{Labels: map[string]string{benchLabel: prefix}})
			_, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
			return err
		}
		svc := workload.LoadBalancerService(namespace, fmt.Sprintf("%s-svc-%d", prefix, i-len(nodeNames)+1), 80)
		_, err := client.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return res, err
	}
	res.create = time.Since(start)
	err = workload.Poll(ctx, o.timeout, fmt.Sprintf("%d nodes initialized and %d services with ingress", o.nodes, o.services), func(ctx context.Context) (bool, string) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=" + prefix})
		if err != nil {
			return false, err.Error()
		}
		svcs, err := client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ni := 0
		for i := range nodes.Items {
			if workload.Initialized(&nodes.Items[i]) {
				ni++
			}
		}
		si := 0
		for i := range svcs.Items {
			if strings.HasPrefix(svcs.Items[i].Name, prefix+"-") && len(svcs.Items[i].Status.LoadBalancer.Ingress) > 0 {
				si++
			}
		}
		now := time.Since(start)
		if ni == o.nodes && res.nodes == 0 {
			res.nodes = now
		}
		if si == o.services && res.services == 0 {
			res.services = now
		}
		return res.nodes > 0 && res.services > 0, fmt.Sprintf("%d/%d nodes initialized, %d/%d services with ingress", ni, o.nodes, si, o.services)
	})
	if err != nil {
		return res, fmt.Errorf("%w; CCM log %s:\n%s", err, c.LogPath(), c.LogTail(20))
	}
	res.total = max(res.nodes, res.services)
	// Backends converge last: a coalescing window may still hold the
	// last Nodes' change when the last ingress is set.
	err = workload.Poll(ctx, o.timeout, fmt.Sprintf("every load balancer with %d backends", o.nodes), func(ctx context.Context) (bool, string) {
		st, err := admin.State(ctx)
		if err != nil {
			return false, err.Error()
		}
		res.fullBackends = fullBackends(st, o.nodes)
		return res.fullBackends == o.services, fmt.Sprintf("%d/%d load balancers with every node as backend", res.fullBackends, o.services)
	})
	if err != nil {
		return res, fmt.Errorf("%w; CCM log %s:\n%s", err, c.LogPath(), c.LogTail(20))
	}
	res.backends = time.Since(start)
	// Count what the last windows still write (nothing, once converged).
	time.Sleep(o.coalesceWindow + time.Second)
	if res.calls, err = admin.Calls(ctx); err != nil {
		return res, err
	}
	if res.usage, err = meter.stop(); err != nil {
		return res, fmt.Errorf("reading the CCM's usage: %w", err)
	}
	return res, nil
}

// fullBackends counts the load balancers of st whose backends, their own
// or those of the shared pool they reference, are n Nodes.
func fullBackends(st fake.State, n int) int {
	members := map[string]int{}
	for _, p := range st.BackendPools {
		members[p.ID] = len(p.Spec.Backends)
	}
	full := 0
	for _, lb := range st.LoadBalancers {
		got := len(lb.Spec.Backends)
		if lb.Spec.BackendPool != "" {
			got = members[lb.Spec.BackendPool]
		}
		if got == n {
			full++
		}
	}
	return full
}

// byOp formats the calls of c by operation, in order.
func byOp(c fake.Calls) string {
	ops := slices.Sorted(maps.Keys(c.ByOp))
	parts := make([]string, 0, len(ops))
	for _, op := range ops {
		parts = append(parts, fmt.Sprintf("%s %d", op, c.ByOp[op]))
	}
	return strings.Join(parts, ", ")
}

// cleanup deletes the run's Services (finalizers removed, the CCM being
// gone) and Nodes, and waits until they are gone.
func cleanup(client kubernetes.Interface, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	svcs, err := client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	err = parallel(8, len(svcs.Items), func(i int) error {
		name := svcs.Items[i].Name
		if _, err := client.CoreV1().Services(namespace).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := client.CoreV1().Services(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	sel := metav1.ListOptions{LabelSelector: benchLabel + "=" + prefix}
	if err := client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		return err
	}
	return workload.Poll(ctx, 2*time.Minute, "the run's nodes and services to be deleted", func(ctx context.Context) (bool, string) {
		nodes, err := client.CoreV1().Nodes().List(ctx, sel)
		if err != nil {
			return false, err.Error()
		}
		svcs, err := client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(nodes.Items) == 0 && len(svcs.Items) == 0, fmt.Sprintf("%d nodes, %d services left", len(nodes.Items), len(svcs.Items))
	})
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(workers, n int, f func(int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
