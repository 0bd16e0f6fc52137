package scale

import (
	"context"
	"fmt"
	"net"
	"sync"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	nodelifecyclecontroller "k8s.io/cloud-provider/controllers/nodelifecycle"
	routecontroller "k8s.io/cloud-provider/controllers/route"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/ccmkit/ccmkit/housekeeping"

	// The route controller reads its feature gates from the default gate.
	_ "k8s.io/controller-manager/pkg/features/register"
)

// clusterCIDR holds the Nodes' pod CIDRs (podCIDR), one /24 per Node.
const clusterCIDR = "100.64.0.0/10"

// ccm is one run of the four upstream controllers, as a
// cloud-controller-manager process runs them, against the fake clientset
// and a metered provider. Its goroutines end with stop.
type ccm struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startCCM starts the service, cloud node, cloud node lifecycle and (when
// the provider offers Routes) route controllers, and ccmkit's drift-repair
// controller when Config.DriftRepairPeriod is set, with informers of their
// own, with the upstream defaults of one worker each
// (--concurrent-service-syncs, --concurrent-node-syncs).
func startCCM(ctx context.Context, kube kubernetes.Interface, cloud *meter, cfg Config) (*ccm, error) {
	ctx, cancel := context.WithCancel(ctx)
	c := &ccm{cancel: cancel}
	inf := informers.NewSharedInformerFactory(kube, 0)
	metrics := controllersmetrics.NewControllerManagerMetrics("scale")
	p := cfg.periods()
	runs, err := controllerRuns(kube, inf, cloud, cfg.ClusterName, p, metrics)
	if err != nil {
		cancel()
		return nil, err
	}
	inf.Start(ctx.Done())
	for _, run := range runs {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			run(ctx)
		}()
	}
	return c, nil
}

// controllerRuns builds the controllers and returns their Run methods.
func controllerRuns(kube kubernetes.Interface, inf informers.SharedInformerFactory, cloud *meter, clusterName string, p periods, metrics *controllersmetrics.ControllerManagerMetrics) ([]func(context.Context), error) {
	nodes, services := inf.Core().V1().Nodes(), inf.Core().V1().Services()
	var runs []func(context.Context)
	if lb, ok := cloud.LoadBalancer(); ok {
		sc, err := servicecontroller.New(cloud, kube, services, nodes, clusterName, utilfeature.DefaultFeatureGate)
		if err != nil {
			return nil, fmt.Errorf("service controller: %w", err)
		}
		runs = append(runs, func(ctx context.Context) { sc.Run(ctx, 1, metrics) })
		if r, ok := lb.(housekeeping.Repairer); ok && p.drift > 0 {
			d, err := housekeeping.NewDriftRepair(r, kube, services, nodes, housekeeping.DriftRepairOptions{ClusterName: clusterName, Period: p.drift})
			if err != nil {
				return nil, fmt.Errorf("drift repair: %w", err)
			}
			runs = append(runs, func(ctx context.Context) { _ = d.Run(ctx) })
		}
	}
	nc, err := nodecontroller.NewCloudNodeController(nodes, kube, cloud, p.nodeStatus, 1, 1)
	if err != nil {
		return nil, fmt.Errorf("cloud node controller: %w", err)
	}
	lc, err := nodelifecyclecontroller.NewCloudNodeLifecycleController(nodes, kube, cloud, p.nodeMonitor, 1)
	if err != nil {
		return nil, fmt.Errorf("cloud node lifecycle controller: %w", err)
	}
	runs = append(runs, func(ctx context.Context) { nc.RunWithContext(ctx, metrics) }, func(ctx context.Context) { lc.Run(ctx, metrics) })
	if rs, ok := cloud.Routes(); ok {
		_, cidr, _ := net.ParseCIDR(clusterCIDR) // a constant
		rc, err := routecontroller.New(rs, kube, nodes, clusterName, []*net.IPNet{cidr})
		if err != nil {
			return nil, fmt.Errorf("route controller: %w", err)
		}
		runs = append(runs, func(ctx context.Context) { rc.Run(ctx, p.route, metrics) })
	}
	return runs, nil
}

// stop stops the controllers and waits for their goroutines.
func (c *ccm) stop() {
	c.cancel()
	c.wg.Wait()
}
