package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
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

const (
	namespace = "demo"
	// cluster is the cluster ID (fake.Config.ClusterID: it owns the load
	// balancers and routes) and, for the reader of the logs, --cluster-name.
	cluster     = "demo"
	clusterCIDR = "10.244.0.0/16"
)

func main() {
	var (
		nodes        = flag.Int("nodes", 3, "number of Nodes (and cloud instances) to create")
		services     = flag.Int("services", 2, "number of LoadBalancer Services to create")
		exitAfter    = flag.Bool("exit-after-summary", false, "stop everything and exit after printing the summary")
		timeout      = flag.Duration("timeout", 2*time.Minute, "how long to wait for the nodes and services to converge")
		delay        = flag.Duration("provisioning-delay", 3*time.Second, "how long the fake cloud takes to provision a load balancer (0s: at once)")
		dir          = flag.String("dir", "", "directory for logs, data and the kubeconfig (kept); default: a temporary directory removed on exit")
		buildTimeout = 30 * time.Minute
	)
	flag.Parse()
	if *nodes < 1 || *nodes > 250 {
		fmt.Fprintf(os.Stderr, "demo: -nodes=%d: want 1 to 250 (one /24 pod CIDR each in %s)\n", *nodes, clusterCIDR)
		os.Exit(2)
	}
	if *services < 0 {
		fmt.Fprintf(os.Stderr, "demo: -services=%d: want 0 or more\n", *services)
		os.Exit(2)
	}
	if *delay < 0 {
		fmt.Fprintf(os.Stderr, "demo: -provisioning-delay=%s: want 0s or more\n", *delay)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{out: os.Stdout, start: time.Now(), nodes: *nodes, services: *services, delay: *delay,
		seenNode: map[string]bool{}, lbs: newLBProgress(*delay)}
	err := d.run(ctx, *dir, buildTimeout, *timeout, *exitAfter)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	out      io.Writer
	start    time.Time
	nodes    int
	services int
	// delay is the fake cloud's provisioning delay of a load balancer.
	delay time.Duration
	st    *stack.Stack

	seenNode map[string]bool
	lbs      *lbProgress
	routes   int
}

// logf prints a progress line stamped with the time since start.
func (d *demo) logf(format string, args ...any) {
	fmt.Fprintf(d.out, "[%6.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// Write makes the demo a progress writer for the stack.
func (d *demo) Write(p []byte) (int, error) {
	d.logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (d *demo) run(ctx context.Context, dir string, buildTimeout, timeout time.Duration, exitAfter bool) (err error) {
	fmt.Fprintln(d.out, "ccmkit demo: the example cloud-controller-manager and the fake cloud against a real kube-apiserver on 127.0.0.1")
	startCtx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	// The realistic mode (fake.Config.Realistic): load balancers take
	// d.delay to provision, the cloud API is rate-limited, and load
	// balancers keep their backends by instance ID.
	cloud := fake.Config{
		ClusterID:     cluster,
		Realistic:     true,
		InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"},
		Instances:     fakecloud.Instances("node", d.nodes),
		LoadBalancers: fake.LoadBalancerSection{ProvisioningDelay: &provider.Duration{Duration: d.delay}},
	}
	d.st, err = stack.Start(startCtx, stack.Config{
		Dir:      dir,
		Cloud:    cloud,
		CCM:      ccm.Config{LeaderElect: true, ClusterName: cluster, ClusterCIDR: clusterCIDR, ExtraArgs: housekeepingArgs()},
		Progress: d,
	})
	if err != nil {
		return err
	}
	defer func() {
		d.logf("stopping the CCM, kube-apiserver and etcd")
		if stopErr := d.st.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	limit, err := d.st.Admin.RateLimit(ctx)
	if err != nil || limit.ReadsPerSecond == nil || limit.WritesPerSecond == nil {
		return fmt.Errorf("the fake's rate limit: %+v, %w", limit, err)
	}
	fmt.Fprintf(d.out, "fake cloud in realistic mode: load balancers provision in %s, API limited to %g reads/s and %g writes/s (burst %d), backends kept by instance ID\n",
		d.delay, *limit.ReadsPerSecond, *limit.WritesPerSecond, limit.Burst)

	// Nodes first, as in a cluster: kubelets register, the CCM initializes
	// them; then workloads ask for load balancers.
	if err := d.createNodes(ctx); err != nil {
		return err
	}
	if err := d.watch(ctx, timeout, false); err != nil {
		return err
	}
	if err := d.createServices(ctx); err != nil {
		return err
	}
	if err := d.watch(ctx, timeout, true); err != nil {
		return err
	}
	if err := d.summary(ctx); err != nil {
		return err
	}
	fmt.Fprintln(d.out)
	if err := d.showDrift(ctx, timeout); err != nil {
		return err
	}
	if err := d.showOrphan(ctx, timeout); err != nil {
		return err
	}
	if exitAfter {
		return nil
	}
	fmt.Fprintf(d.out, "\nThe cluster keeps running. Try:\n")
	fmt.Fprintf(d.out, "  kubectl --kubeconfig %s get nodes -o wide\n", d.st.ControlPlane.KubeconfigPath())
	fmt.Fprintf(d.out, "  kubectl --kubeconfig %s get services -n %s\n", d.st.ControlPlane.KubeconfigPath(), namespace)
	fmt.Fprintf(d.out, "  curl -s http://%s/state            # the fake cloud\n", d.st.Admin.Address())
	fmt.Fprintf(d.out, "  curl -s -X POST -H 'Content-Type: application/json' http://%s/instances/i-node-1/terminate   # watch node-1 go\n", d.st.Admin.Address())
	fmt.Fprintf(d.out, "CCM log: %s\nPress Ctrl-C to stop.\n", d.st.CCM.LogPath())
	select {
	case <-ctx.Done():
		fmt.Fprintln(d.out)
	case <-d.st.CCM.Done():
		return fmt.Errorf("the CCM exited; last log lines:\n%s", d.st.CCM.LogTail(30))
	}
	return nil
}

func (d *demo) nodeName(i int) string { return fmt.Sprintf("node-%d", i+1) }
func (d *demo) serviceName(i int) string {
	return []string{"web", "api", "db", "cache", "queue"}[i%5] + suffix(i)
}

func suffix(i int) string {
	if i < 5 {
		return ""
	}
	return fmt.Sprintf("-%d", i/5+1)
}

func (d *demo) createNodes(ctx context.Context) error {
	c := d.st.Client
	var names []string
	for i := range d.nodes {
		n := workload.Node(d.nodeName(i), workload.NodeOptions{PodCIDRs: []string{fmt.Sprintf("10.244.%d.0/24", i+1)}})
		if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
		names = append(names, n.Name)
	}
	d.logf("created nodes %s, tainted %s as kubelets with --cloud-provider=external register them", strings.Join(names, ", "), workload.UninitializedTaint)
	return nil
}

func (d *demo) createServices(ctx context.Context) error {
	c := d.st.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	var names []string
	for i := range d.services {
		svc := d.service(i)
		if _, err := c.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating service %s: %w", svc.Name, err)
		}
		names = append(names, namespace+"/"+svc.Name)
	}
	if len(names) > 0 {
		d.logf("created LoadBalancer services %s; %s terminates TLS on port 443 (appProtocol https, %s: 443=%s)",
			strings.Join(names, ", "), names[0], certificateAnnotation, webCertificate)
	}
	return nil
}

// webCertificate is the certificate reference of the first Service's
// HTTPS port.
const webCertificate = "cert-web"

// service returns the i-th LoadBalancer Service, with ports 80 and 443.
// The first one's port 443 serves https with the certificate
// webCertificate (the fake's per-port annotation certificateAnnotation),
// which its load balancer's listener reports.
func (d *demo) service(i int) *corev1.Service {
	svc := workload.LoadBalancerService(namespace, d.serviceName(i), 80, 443)
	if i == 0 {
		svc.Spec.Ports[1].AppProtocol = ptr.To("https")
		svc.Annotations = map[string]string{certificateAnnotation: "443=" + webCertificate}
	}
	return svc
}

// watch polls until every node is initialized and has its route (and,
// with services, every service has an ingress), printing each as it
// happens.
func (d *demo) watch(ctx context.Context, timeout time.Duration, services bool) error {
	want := d.services
	if !services {
		want = 0
	}
	what := fmt.Sprintf("%d nodes initialized with their routes", d.nodes)
	if services {
		what = fmt.Sprintf("%d services with an ingress", d.services)
	}
	err := workload.Poll(ctx, timeout, what, func(ctx context.Context) (bool, string) {
		nodes, err := d.st.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes.Items {
			if workload.Initialized(&n) && !d.seenNode[n.Name] {
				d.seenNode[n.Name] = true
				d.logf("node %s initialized: providerID %s, zone %s, type %s, %d addresses, taint removed",
					n.Name, n.Spec.ProviderID, n.Labels[corev1.LabelTopologyZone], n.Labels[corev1.LabelInstanceTypeStable], len(n.Status.Addresses))
			}
		}
		svcs, err := d.st.Client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(svcs.Items) > 0 {
			lbs, err := d.st.Admin.LoadBalancers(ctx)
			if err != nil {
				return false, err.Error()
			}
			for _, line := range d.lbs.update(time.Now(), lbs, svcs.Items) {
				d.logf("%s", line)
			}
		}
		if rs, err := d.st.Admin.Routes(ctx, cluster); err == nil && len(rs) != d.routes {
			d.routes = len(rs)
			d.logf("cloud route table: %d routes for the nodes' pod CIDRs", d.routes)
		}
		done := len(d.seenNode) == d.nodes && d.lbs.readyCount() == want && d.routes == d.nodes
		return done, fmt.Sprintf("%d/%d nodes initialized, %d/%d services with ingress, %d/%d routes", len(d.seenNode), d.nodes, d.lbs.readyCount(), want, d.routes, d.nodes)
	})
	if err != nil {
		return fmt.Errorf("%w\nCCM log: %s\n%s", err, d.st.CCM.LogPath(), d.st.CCM.LogTail(20))
	}
	if services {
		d.logf("converged: %d services with an ingress", d.services)
	} else {
		d.logf("converged: %d nodes initialized, %d routes", d.nodes, d.routes)
	}
	return nil
}

func (d *demo) summary(ctx context.Context) error {
	nodes, err := d.st.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	slices.SortFunc(nodes.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	fmt.Fprintln(d.out)
	tw := tabwriter.NewWriter(d.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPROVIDER ID\tZONE\tTYPE\tPOD CIDR\tADDRESSES")
	for _, n := range nodes.Items {
		var addrs []string
		for _, a := range n.Status.Addresses {
			addrs = append(addrs, fmt.Sprintf("%s=%s", a.Type, a.Address))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.Spec.ProviderID, n.Labels[corev1.LabelTopologyZone],
			n.Labels[corev1.LabelInstanceTypeStable], n.Spec.PodCIDR, strings.Join(addrs, " "))
	}
	tw.Flush()
	fmt.Fprintln(d.out)
	svcs, err := d.st.Client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	lbs, err := d.st.Admin.LoadBalancers(ctx)
	if err != nil {
		return err
	}
	lbByUID := map[string]fake.LoadBalancer{}
	for _, lb := range lbs {
		lbByUID[lb.Tags[loadbalancer.TagServiceUID]] = lb
	}
	fmt.Fprintln(tw, "SERVICE\tPORTS\tINGRESS\tCLOUD LOAD BALANCER\tBACKENDS")
	for _, s := range svcs.Items {
		var ports []string
		for _, p := range s.Spec.Ports {
			port := fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
			if p.AppProtocol != nil {
				port += "/" + *p.AppProtocol
			}
			ports = append(ports, port)
		}
		lb := lbByUID[string(s.UID)]
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%d\n", s.Namespace, s.Name, strings.Join(ports, ","),
			strings.Join(workload.IngressIPs(&s), ","), lb.Name, len(lb.Spec.Backends))
	}
	tw.Flush()
	calls, err := d.st.Admin.Calls(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "\nfake cloud: %d instances, %d load balancers; cloud API calls so far: %d reads, %d writes, %d throttled by the rate limit\n",
		d.nodes, len(lbs), calls.Reads, calls.Writes, calls.Throttled)
	return nil
}
