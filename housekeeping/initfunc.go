package housekeeping

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	v1core "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	genericapp "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"
)

// NewDriftRepairController returns the entry of the drift repair
// controller for a CCM's controller map (the map
// app.NewCloudControllerManagerCommand takes), to put under
// DriftRepairName, with its own client name. It is not a constructor of a
// controller but of its map entry: the controller is built, with
// NewDriftRepair, when the CCM starts its controllers, after its flags are
// parsed, so a main may bind flags to the fields of opts. ClusterName is
// always the CCM's --cluster-name (a different one would give the
// controller another identity than the service controller's); a nil
// Recorder is one that records through the CCM's client, as component
// DriftRepairName. The controller is skipped, with a log line, when the
// cloud has no LoadBalancer or its LoadBalancer is not a Repairer (a
// provider not built on loadbalancer.Reconciler). A nil opts is the zero
// DriftRepairOptions: every default.
func NewDriftRepairController(opts *DriftRepairOptions) app.ControllerInitFuncConstructor {
	return constructor(DriftRepairName, func(ctx context.Context, cloud cloudprovider.Interface, lb cloudprovider.LoadBalancer, client kubernetes.Interface, c *config.CompletedConfig) (runner, error) {
		repairer, ok := lb.(Repairer)
		if !ok {
			klog.FromContext(ctx).Info("Not starting: the cloud's load balancers cannot repair (housekeeping.Repairer)", "controller", DriftRepairName, "type", fmt.Sprintf("%T", lb))
			return nil, nil
		}
		var o DriftRepairOptions
		if opts != nil {
			o = *opts
		}
		o.ClusterName = c.ComponentConfig.KubeCloudShared.ClusterName
		if o.Recorder == nil {
			o.Recorder = recorder(ctx, client, DriftRepairName)
		}
		informers := c.SharedInformers.Core().V1()
		return NewDriftRepair(repairer, client, informers.Services(), informers.Nodes(), o)
	})
}

// NewOrphanCollectionController is NewDriftRepairController for the
// orphan collection controller, under OrphanCollectionName. It is skipped,
// with a log line, when the cloud has no LoadBalancer, when its
// LoadBalancer cannot list what the cluster owns (Owners), and when the
// cloud has no cluster ID (cloudprovider.Interface HasClusterID, possible
// with --allow-untagged-cloud): the cluster identity would then be
// --cluster-name, "kubernetes" unless set, which two clusters sharing one
// cloud account may both have, and each would collect the other's load
// balancers. A nil opts is the zero OrphanCollectorOptions.
func NewOrphanCollectionController(opts *OrphanCollectorOptions) app.ControllerInitFuncConstructor {
	return constructor(OrphanCollectionName, func(ctx context.Context, cloud cloudprovider.Interface, lb cloudprovider.LoadBalancer, client kubernetes.Interface, c *config.CompletedConfig) (runner, error) {
		logger := klog.FromContext(ctx)
		owners, ok := lb.(Owners)
		if !ok {
			logger.Info("Not starting: the cloud's load balancers cannot list what the cluster owns (housekeeping.Owners)", "controller", OrphanCollectionName, "type", fmt.Sprintf("%T", lb))
			return nil, nil
		}
		if !cloud.HasClusterID() {
			logger.Info("Not starting: the cloud has no cluster ID, so load balancers of another cluster with the same --cluster-name would look like orphans", "controller", OrphanCollectionName)
			return nil, nil
		}
		var o OrphanCollectorOptions
		if opts != nil {
			o = *opts
		}
		o.ClusterName = c.ComponentConfig.KubeCloudShared.ClusterName
		if o.Recorder == nil {
			o.Recorder = recorder(ctx, client, OrphanCollectionName)
		}
		return NewOrphanCollector(owners, client, c.SharedInformers.Core().V1().Services(), o)
	})
}

// runner is a built controller.
type runner interface {
	controller.Interface
	Run(ctx context.Context) error
}

// build builds a controller; a nil runner and nil error mean "skip".
type build func(ctx context.Context, cloud cloudprovider.Interface, lb cloudprovider.LoadBalancer, client kubernetes.Interface, c *config.CompletedConfig) (runner, error)

// constructor is the controller-map entry shared by both controllers: it
// builds the controller with b when the CCM starts its controllers and
// runs it until the CCM's context ends.
func constructor(name string, b build) app.ControllerInitFuncConstructor {
	return app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: name},
		Constructor: func(initContext app.ControllerInitContext, c *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, _ genericapp.ControllerContext) (controller.Interface, bool, error) {
				lb, ok := cloud.LoadBalancer()
				if !ok {
					klog.FromContext(ctx).Info("Not starting: the cloud has no load balancers", "controller", name)
					return nil, false, nil
				}
				client := c.ClientBuilder.ClientOrDie(initContext.ClientName)
				r, err := b(ctx, cloud, lb, client, c)
				if err != nil || r == nil {
					return nil, false, err
				}
				go func() { _ = r.Run(ctx) }() // Run returns nil when ctx ends
				return r, true, nil
			}
		},
	}
}

// recorder returns an event recorder writing through client as
// component; its broadcaster (and its goroutines) stop when ctx ends
// (record.WithContext).
func recorder(ctx context.Context, client kubernetes.Interface, component string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&v1core.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: component})
}
