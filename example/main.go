// Command example is the cloud-controller-manager main a team copies to start
// its own CCM. It runs the four upstream controllers (cloud-node,
// cloud-node-lifecycle, service, route) from k8s.io/cloud-provider/app
// against the provider named by --cloud-provider, here ccmkit's fake cloud:
//
//	go run ./example --cloud-provider=fake --cloud-config=example/cloud-config.yaml \
//	    --kubeconfig=$HOME/.kube/config --leader-elect=false
//
// To make it yours: replace the fake import with your provider package (whose
// init calls provider.Register), and keep the rest: the providers this binary
// offers are the ones registered (provider.Registered), so there is no list
// to keep next to the imports.
//
// What a provider composed from ccmkit's blocks brings with no code here:
// its cloud calls on /metrics (ccmkit_cloud_requests_total and
// ccmkit_cloud_request_duration_seconds, in the registry the CCM serves),
// and Warning events on a Service for what its user can fix (a malformed
// annotation, an unsupported feature, a load balancer owned by someone
// else, a Node left out of the backends), recorded by the
// loadbalancer.Reconciler through the event broadcaster it starts when the
// CCM initializes the cloud (see package loadbalancer, "Events").
//
// Beyond the upstream controllers it runs ccmkit's two housekeeping
// controllers (package housekeeping), each with its own name for
// --controllers and its flags in the "ccmkit housekeeping" flag set:
//
//   - drift-repair re-ensures every LoadBalancer Service each
//     --drift-repair-period, putting back what was changed in the cloud
//     behind the CCM's back;
//   - orphan-collection deletes, each --orphan-collection-period, the load
//     balancers tagged for this cluster whose Service UID is gone, once
//     they have been orphaned for --orphan-grace-period
//     (--orphan-dry-run only reports them).
package main

import (
	"maps"
	"os"

	"github.com/spf13/cobra"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/klog/v2"

	_ "github.com/ccmkit/ccmkit/fake/register" // registers provider "fake"
	"github.com/ccmkit/ccmkit/housekeeping"
	"github.com/ccmkit/ccmkit/provider"
)

func main() {
	cmd, err := newCommand()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	os.Exit(cli.Run(cmd))
}

// newCommand builds the cloud-controller-manager command.
// NewCloudControllerManagerCommand registers the controller, leader
// election, authentication and logging flags (--v, --logging-format, ...).
func newCommand() (*cobra.Command, error) {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	var h housekeepingOptions
	return app.NewCloudControllerManagerCommand(opts, initCloud, controllers(&h), names.CCMControllerAliases(), h.flags(), wait.NeverStop), nil
}

// housekeepingOptions are the options of ccmkit's housekeeping
// controllers, bound to their flags; the controllers read them when the
// CCM starts them, after the flags are parsed.
type housekeepingOptions struct {
	drift   housekeeping.DriftRepairOptions
	orphans housekeeping.OrphanCollectorOptions
}

// flags returns the "ccmkit housekeeping" flag set. Each flag's default is
// 0, the package's default (stated in the help, from the field's doc), so
// that the value lives in one place.
func (h *housekeepingOptions) flags() cliflag.NamedFlagSets {
	var sets cliflag.NamedFlagSets
	fs := sets.FlagSet("ccmkit housekeeping")
	fs.DurationVar(&h.drift.Period, "drift-repair-period", 0,
		"How often the drift-repair controller re-ensures every LoadBalancer Service: a load balancer changed in the cloud behind the CCM's back is repaired within about one period. 0 means 10m.")
	fs.DurationVar(&h.orphans.Period, "orphan-collection-period", 0,
		"How often the orphan-collection controller lists the load balancers tagged for this cluster. 0 means 5m.")
	fs.DurationVar(&h.orphans.GracePeriod, "orphan-grace-period", 0,
		"How long a load balancer whose Service UID is gone stays before orphan-collection deletes it. 0 means 15m; negative means none.")
	fs.BoolVar(&h.orphans.DryRun, "orphan-dry-run", false,
		"Only report orphaned load balancers (a log line and an event per orphan); delete nothing.")
	return sets
}

// controllers returns the controller set to run: the upstream ones and
// ccmkit's housekeeping controllers, configured by h. It clones
// app.DefaultInitFuncConstructors before any change: the upstream sample
// (k8s.io/cloud-provider/sample/basic_main.go) edits the package-level map in
// place, which leaks into every other user of the app package. Change the
// clone here, e.g. to give each controller its own client name when running
// with --use-service-account-credentials.
func controllers(h *housekeepingOptions) map[string]app.ControllerInitFuncConstructor {
	m := maps.Clone(app.DefaultInitFuncConstructors)
	m[housekeeping.DriftRepairName] = housekeeping.NewDriftRepairController(&h.drift)
	m[housekeeping.OrphanCollectionName] = housekeeping.NewOrphanCollectionController(&h.orphans)
	return m
}

// initCloud builds the provider named by --cloud-provider from
// --cloud-config. A CCM that cannot build its cloud must not start, so the
// failures here are fatal, with a message that says what to fix.
func initCloud(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared
	name, path := shared.CloudProvider.Name, shared.CloudProvider.CloudConfigFile
	cloud, err := provider.InitCloud(name, path)
	if err != nil {
		klog.Fatal(err)
	}
	// k8s.io/cloud-provider/app does not check the cluster ID itself: a
	// provider without one could adopt or delete another cluster's resources.
	if !cloud.HasClusterID() {
		if shared.AllowUntaggedCloud {
			klog.Warningf("cloud provider %q has no cluster ID; continuing because --allow-untagged-cloud is set", name)
		} else {
			klog.Fatalf("cloud provider %q has no cluster ID: set one in --cloud-config, or pass --allow-untagged-cloud to run without one", name)
		}
	}
	return cloud
}
