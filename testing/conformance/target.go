package conformance

import (
	"context"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// Target is one fresh provider under test, its fixtures and its hooks.
type Target struct {
	// Cloud is the provider under test, as its factory returns it. The suite
	// calls Initialize (and SetInformers, for a cloudprovider.InformerUser)
	// before a rule uses it, as the cloud-controller-manager does.
	Cloud cloudprovider.Interface

	// Nodes are Node objects as the cloud node controller initialized them
	// (spec.providerID set, addresses in status), whose cloud instances
	// exist and run, each named as the provider finds it by name (such as
	// its instance's name). Rules that look a node up by name remove the
	// provider ID from a copy, as a kubelet registers it. The suite never
	// modifies them (it works on copies). Instance rules need at least 1,
	// backend rules at least 2.
	Nodes []*v1.Node

	// RenamedNodes are further Nodes as the cloud node controller
	// initialized them, each named unlike anything the provider can look up
	// by name (a kubelet run with --hostname-override and --provider-id):
	// the provider finds their instances by spec.providerID only, which is
	// required. The instance, load-balancer and node lifecycle rules use
	// them next to Nodes; the rules that look nodes up by name, and the
	// route rules (Route.TargetNode is a Node name), use Nodes only.
	// Optional, and recommended: a provider that looks instances up by name
	// passes with Nodes alone.
	RenamedNodes []*v1.Node

	// Hooks arrange and inspect cloud state. Each is optional: a rule that
	// needs a missing hook is skipped with the reason.
	Hooks Hooks

	// OtherCluster, if set, is the same provider over the same cloud,
	// configured as another cluster (another cluster ID, such as
	// loadbalancer.Options.ClusterID or routes.Options.ClusterID, in its
	// cloud-config), built fresh with this Target and released by Close.
	// The suite initializes it as it initializes Cloud, against a clientset
	// of its own holding copies of Nodes.
	//
	// With it, LB-CLUSTER-ISOLATION and ROUTE-CLUSTER-SCOPE run the two
	// clusters as two clusters restored from one etcd backup, both with the
	// default --cluster-name: the same clusterName argument
	// (Config.ClusterName) and the same Service namespace, name and UID,
	// through Cloud and OtherCluster. Nil: those rules tell the clusters
	// apart by the clusterName argument alone (Config.ClusterName and
	// Config.CrossClusterName through Cloud, Services with UIDs of their
	// own), which says nothing of a provider that owns its resources by a
	// cluster ID of its own and ignores clusterName, and fails its routes
	// (ROUTE-CLUSTER-SCOPE): give such a provider an OtherCluster. Hooks
	// describe the cloud as Cloud sees it, never as OtherCluster does.
	OtherCluster cloudprovider.Interface

	// Ready, if set, is called once the suite has initialized Cloud (and
	// OtherCluster) and its informers have synced, before the rule's first
	// call; it returns when the provider can serve calls, or an error,
	// which fails the rule naming Target.Ready. It is for a provider whose
	// Initialize finishes its set-up in a goroutine (GCE's starts a watch
	// of its cluster-ID ConfigMap, gce.go Initialize): a
	// cloud-controller-manager gives such a goroutine the time its
	// controllers spend waiting for their informers to sync over HTTP
	// (cache.WaitForNamedCacheSync in each controller's Run), while the
	// suite's informers sync in-process at once. Nil: the provider is
	// ready when Initialize returns, as ccmkit's are.
	Ready func(ctx context.Context) error

	// Close, if set, is called when the rule that created the target ends.
	// It releases Cloud, OtherCluster and the fixtures.
	Close func()
}

// Hooks let the suite arrange and inspect cloud state directly, bypassing the
// provider. Each hook may be nil. Hooks are called from the rule's goroutine
// and, in controller rules, while controllers call the provider: they must be
// safe for concurrent use with the provider. An error from a hook fails the
// rule that called it, naming the hook.
type Hooks struct {
	// CreateInstance creates a new running instance named name and returns
	// the Node a kubelet on it would register. It changes the cloud behind
	// the provider's back: CloudChanged follows it.
	CreateInstance func(ctx context.Context, name string) (*v1.Node, error)
	// StopInstance stops (shuts down, without deleting) node's instance.
	// CloudChanged follows it.
	StopInstance func(ctx context.Context, node *v1.Node) error
	// StartInstance starts node's stopped instance again. CloudChanged
	// follows it.
	StartInstance func(ctx context.Context, node *v1.Node) error
	// TerminateInstance deletes node's instance for good. CloudChanged
	// follows it.
	TerminateInstance func(ctx context.Context, node *v1.Node) error

	// CloudChanged, if set, is called right after a hook above, or
	// Damage, changed the cloud behind the provider's back, before the
	// suite looks for the change through the provider. A provider that
	// answers from caches drops them here (instances.Cache.Invalidate,
	// loadbalancer.Cache.Invalidate), as it would when its
	// cloud told it of the change (an event, a webhook); one that cannot
	// declares its cache TTL in Config.MaxStaleness instead. It is never
	// called concurrently with itself.
	CloudChanged func(ctx context.Context) error

	// Owned lists identifiers of every cloud resource the provider created
	// and still owns (load balancers and their parts, backend pools,
	// routes…), in any order. It detects leaks: after a delete, the list
	// must be back to what it was.
	Owned func(ctx context.Context) ([]string, error)
	// Writes returns how many mutating calls the provider has made to the
	// cloud API so far. A Meter gives Writes and Outage from one
	// interception point of the provider's cloud client (an
	// http.RoundTripper, a mock's per-call hook), so that no write method
	// needs a wrapper of its own.
	Writes func() int64
	// Outage makes every cloud API call fail until the returned function is
	// called. It is for the rules that check the provider reports doubt as
	// an error.
	Outage func() (restore func())

	// Backends returns the names of the nodes behind svc's load balancer in
	// clusterName, in any order: its own backends and the members of a
	// backend pool it references.
	Backends func(ctx context.Context, clusterName string, svc *v1.Service) ([]string, error)
	// Listeners returns the front-end ports of svc's load balancer.
	Listeners func(ctx context.Context, clusterName string, svc *v1.Service) ([]Listener, error)
	// SourceRanges returns the CIDRs allowed to reach svc's load balancer.
	SourceRanges func(ctx context.Context, clusterName string, svc *v1.Service) ([]string, error)
	// HealthCheck returns the health check of svc's load balancer's backends.
	HealthCheck func(ctx context.Context, clusterName string, svc *v1.Service) (HealthCheck, error)

	// Damage removes part of svc's converged load balancer in clusterName
	// behind the provider's back, as a user in the cloud's console or a
	// failed cloud operation would: one backend, or on a cloud whose
	// listeners have pools of their own one member of one pool, or a
	// listener's pool. It returns how many cloud objects it removed, at
	// least 1 (a pool with its members and its health monitor is that
	// many): LB-PARTIAL-REPAIR allows the repair as many cloud writes.
	// CloudChanged follows it.
	Damage func(ctx context.Context, clusterName string, svc *v1.Service) (objects int, err error)
}

// Listener is one front-end port of a load balancer, forwarding to NodePort
// on the backends: 0 for a Service with allocateLoadBalancerNodePorts=false,
// and for every listener of a load balancer that passes traffic through
// (Claims.PassThrough). On a cloud whose listeners have backend pools of
// their own (a pool per port), report each listener with the node port its
// pool's members are reached on.
type Listener struct {
	Protocol v1.Protocol
	Port     int32
	NodePort int32
	// AppProtocol is the application protocol the listener serves, as
	// spec.ports[].appProtocol names it, or "" for a plain Protocol
	// listener. Only LB-PER-PORT compares it with the Service's ports,
	// and only with Claims.AppProtocols: there a Hooks.Listeners that
	// leaves it empty makes the rule fail, not skip. The other rules
	// leave it out of their comparisons.
	AppProtocol string
}

// HealthCheck is how a load balancer checks its backends: an HTTP GET of Path
// on Port of each node. Path is empty for a TCP check.
type HealthCheck struct {
	Port int32
	Path string
}
