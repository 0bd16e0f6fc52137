package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// Config describes the provider under test. Only NewTarget is required; the
// zero value of every other field is a documented default.
type Config struct {
	// NewTarget returns a fresh provider under test, with its fixtures and
	// hooks. It is called once per rule, so that rules are independent: the
	// returned cloud holds no load balancers and no routes of its own, and
	// the instances of Target.Nodes exist and run. ctx is the rule's context.
	NewTarget func(ctx context.Context) (*Target, error)

	// Claims lists the capabilities and features the provider offers. A rule
	// that needs an unclaimed one is skipped with the reason.
	Claims Claims

	// ProviderName is the name the provider is registered under with
	// cloudprovider.RegisterCloudProvider. Empty skips PROVIDER-REGISTRATION
	// and PROVIDER-BAD-CONFIG; otherwise it must also equal ProviderName().
	ProviderName string
	// CloudConfig is a valid --cloud-config for the registered factory. Empty
	// means the factory must work with no config (a nil reader).
	CloudConfig string
	// BadCloudConfig is a --cloud-config the registered factory must reject
	// with an error. Empty skips PROVIDER-BAD-CONFIG.
	BadCloudConfig string

	// AllowUntaggedCloud declares that the provider is run with
	// --allow-untagged-cloud, and skips PROVIDER-CLUSTER-ID.
	AllowUntaggedCloud bool

	// ClusterName is the --cluster-name the controllers pass to the provider.
	// Default "conformance". CrossClusterName, default ClusterName+"-other",
	// is the second cluster of the isolation rules when Target.OtherCluster
	// is nil; with OtherCluster, both clusters are named ClusterName.
	ClusterName      string
	CrossClusterName string

	// ClusterCIDRs is the --cluster-cidr of the route rules and the route
	// controller: one CIDR per IP family. Default "10.244.0.0/16", plus
	// "fd00:10:244::/56" when Claims.IPv6Routes. Pod CIDRs given to nodes are
	// carved from them (/24 for IPv4, /64 for IPv6).
	ClusterCIDRs []string

	// Timeout bounds every wait for a controller to reach a state, the
	// retries of a provider call that fails with an api.RetryError (see
	// "Retries" in the package documentation), and every single provider
	// call made with a cancelled context. Default 30s; negative is an error.
	// A rule as a whole is abandoned after 4×(Timeout+MaxStaleness)+5s.
	Timeout time.Duration

	// MaxStaleness declares how long the provider may keep answering from
	// state it read before the suite changed the cloud behind its back (a
	// cache TTL, such as instances.CacheOptions.TTL): every wait for such a
	// change to show through the provider (an instance stopped, started,
	// terminated or created by a hook) lasts Timeout+MaxStaleness instead of
	// Timeout. Default 0: a provider with caches drops them in
	// Hooks.CloudChanged, reports its TTL itself, or declares it here. A
	// provider reports it by a method MaxStaleness() time.Duration on
	// Target.Cloud or a capability it offers (provider.Cloud,
	// instances.Cache, loadbalancer.Cache and the adapters over them have
	// one): without Hooks.CloudChanged the suite then waits the longer of
	// the two (with it, answers after it are taken to be fresh), so a provider
	// composed from ccmkit's caches at their defaults passes with no
	// configuration (slower than with CloudChanged, which makes the change
	// show at once). With none of these, the rules that wait for such a
	// change (INST-TERMINATED, INST-STOPPED, INST-NEW-INSTANCE,
	// CTRL-NODE-TERMINATED, CTRL-NODE-SHUTDOWN, and LB-PARTIAL-REPAIR
	// after Hooks.Damage) fail when its TTL is longer than Timeout.
	// Negative is an error.
	MaxStaleness time.Duration

	// BusyAfterWrite is how long the provider's cloud stays busy with a
	// load balancer after a write to it, refusing the next write to it
	// meanwhile (OpenStack Octavia leaves a load balancer PENDING_UPDATE
	// for a second or so after each write to one of its objects).
	// LB-MULTI-STEP gives a change of N cloud writes N × (BusyAfterWrite
	// + 1s) to converge, and accepts no api.RetryError asking for more
	// than 2 × max(BusyAfterWrite, 1s), nor a call lasting more than that
	// and 1s; the rules that count the writes of one change
	// (LB-MULTI-STEP, LB-PER-PORT, LB-PARTIAL-REPAIR) wait it out before
	// they make it, so that no write of theirs meets a busy cloud.
	// Default 0: the cloud is never busy. Negative is an error.
	BusyAfterWrite time.Duration

	// PortSetting is a provider setting that a per-port annotation sets
	// for one port at a time, such as a certificate reference: with it
	// (and Claims.AppProtocols), LB-PER-PORT checks that changing the
	// setting of one port is one cloud write that leaves the other
	// listener as it was. Nil skips that check.
	PortSetting *PortSetting

	// UpstreamOnly skips every ccmkit recommendation (Rule.Recommendation):
	// only the upstream contracts run. Default false: recommendations run
	// too, and their failures are marked "[recommendation]".
	UpstreamOnly bool

	// Unclaimed acknowledges claims split off a claim the provider makes
	// (see Claims) that it does not offer: the new claim's field name,
	// such as "SourceRangesAnnotation", to the reason. A Config that
	// claims the old field and neither claims nor acknowledges the new
	// one is invalid, naming both: so a provider's test written before a
	// split stops with that announcement rather than failing a rule that
	// now expects a rejection.
	Unclaimed map[string]string

	// Skip maps what not to run to the reason (a known failure, a rule
	// that does not apply): a rule ID, such as "LB-SOURCE-RANGES", skips the
	// rule; "RULE/case", such as "LB-UNSUPPORTED-REJECTED/udp", skips one
	// case of a table-driven rule (Rule.Cases) and runs the others. A key
	// that names no rule, or no case of its rule, is a configuration error.
	Skip map[string]string
}

// Claims lists what the provider offers. Capabilities select whole groups of
// rules; features select the load-balancer and route variants that are
// checked to work, while the load-balancer variants of unclaimed features are
// checked to be rejected with an error (LB-UNSUPPORTED-REJECTED).
// Claim only what the provider builds as asked.
//
// A claim is never narrowed in place without notice: when part of what one
// covered becomes a claim of its own (SourceRangesAnnotation was split off
// SourceRanges), a Config claiming the old one must claim the new one or
// acknowledge it in Config.Unclaimed, or Validate rejects it naming both.
type Claims struct {
	// Capabilities: the accessors of cloudprovider.Interface that return
	// (impl, true).
	LoadBalancer bool
	InstancesV2  bool
	Routes       bool
	Zones        bool

	// UDP, SCTP: Services with ports of that protocol.
	UDP  bool
	SCTP bool
	// MixedProtocols: one Service with TCP and UDP ports.
	MixedProtocols bool
	// DualStackLoadBalancers: a RequireDualStack Service gets a load
	// balancer with an ingress of each IP family, open by default to all of
	// both. Unclaimed, LB-DUAL-STACK-REJECTED (a recommendation) expects
	// such a Service to be rejected.
	DualStackLoadBalancers bool
	// IPv6Routes: routes for IPv6 pod CIDRs, next to the IPv4 ones of the
	// same node. It adds an IPv6 cluster CIDR to Config.ClusterCIDRs' default.
	IPv6Routes bool
	// DualStackNodeAddresses: every node has addresses of both IP families,
	// among them an InternalIP of each.
	DualStackNodeAddresses bool
	// HostnameIngress: the load balancer may report a hostname instead of an
	// IP as its ingress.
	HostnameIngress bool
	// NodePortless: Services with allocateLoadBalancerNodePorts=false.
	NodePortless bool
	// PassThrough: the load balancers pass traffic through to the nodes,
	// still addressed to the load balancer's IP and the Service port,
	// where kube-proxy takes it (a pass-through network load balancer, such
	// as GCE's target pools), instead of forwarding it to a node port.
	// Hooks.Listeners then reports NodePort 0 for every listener, and the
	// rules expect 0 (see Listener).
	PassThrough bool
	// SourceRanges: load balancers restricted to the client CIDRs of
	// spec.loadBalancerSourceRanges. Unclaimed, a Service with that field
	// must be rejected, not opened to everyone (LB-UNSUPPORTED-REJECTED).
	SourceRanges bool
	// SharedBackendPools: load balancers whose backends are the same set of
	// nodes share one backend pool, so that a node joining any number of
	// Services is one cloud write (LB-SHARED-POOL-WRITES; in ccmkit,
	// loadbalancer.Capabilities.SharedBackendPools). Unclaimed, that rule
	// is skipped; LB-NODE-SYNC and LB-DELETE-SHARED run either way.
	SharedBackendPools bool
	// SourceRangesAnnotation: load balancers restricted to the client CIDRs
	// of the service.beta.kubernetes.io/load-balancer-source-ranges
	// annotation when the spec field is empty. Unclaimed, a Service with a
	// valid restricting annotation must be rejected (LB-SOURCE-RANGES).
	SourceRangesAnnotation bool
	// AppProtocols are the application protocols the load balancers serve
	// on a port, as spec.ports[].appProtocol names them (such as "http",
	// "https" or "kubernetes.io/h2c"), compared exactly: LB-PER-PORT
	// checks that ports carrying them get listeners that report them
	// (Listener.AppProtocol), that a port of any other application
	// protocol is rejected with an error, and Config.PortSetting; with
	// them, LB-MULTI-STEP's change adds a port of the first. Empty
	// (the default) skips LB-PER-PORT: appProtocol is then a hint the
	// provider may ignore.
	AppProtocols []string
}

// PortSetting is a provider setting given per port by an annotation
// (Config.PortSetting), such as a certificate reference for a TLS port.
type PortSetting struct {
	// Annotation is the annotation's name, such as
	// "lb.example.com/certificate". The suite writes its value as
	// "PORT=VALUE", PORT being the number of one of the Service's ports,
	// and expects the other ports to keep the provider's default.
	Annotation string
	// Values are two values the provider accepts for one port, such as
	// two certificate references: different, not empty, and without a
	// comma (which separates the entries of a per-port value).
	Values [2]string
}

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

// Rule describes one rule of the suite.
type Rule struct {
	// ID names the rule in subtests, failures and Config.Skip, such as
	// "LB-IDEMPOTENT".
	ID string
	// Statement is the rule in one sentence.
	Statement string
	// Source is where the contract comes from, as "file function" in
	// k8s.io/cloud-provider@v0.37.2: for an upstream contract, the code
	// that needs it; for a recommendation, the code that makes it sound.
	Source string
	// Recommendation marks a ccmkit recommendation: a policy stricter than
	// what the upstream code needs. False: an upstream contract.
	// Config.UpstreamOnly skips every recommendation.
	Recommendation bool
	// Cases names the cases of a table-driven rule, which Config.Skip
	// accepts as "RULE/case". Nil for a rule without named cases.
	Cases []string
}

// Rules returns every rule of the suite, in the order Run and Check run
// them. The slice is a copy.
func Rules() []Rule {
	out := make([]Rule, len(rules))
	for i, r := range rules {
		out[i] = Rule{ID: r.id, Statement: r.statement, Source: r.source, Recommendation: r.kind == recommendation, Cases: slices.Clone(r.cases())}
	}
	return out
}

// Failure is one broken rule, as Check reports it.
type Failure struct {
	// Rule is the ID of the broken rule.
	Rule string
	// Message says what was observed and what was expected.
	Message string
	// Recommendation is true when the rule is a ccmkit recommendation, not
	// an upstream contract (see Rule.Recommendation).
	Recommendation bool
}

// Error returns "RULE-ID: message", or "RULE-ID: [recommendation] message"
// for a recommendation.
func (f *Failure) Error() string { return f.Rule + ": " + mark(f.Recommendation) + f.Message }

// mark returns the prefix of a recommendation's failure messages.
func mark(rec bool) string {
	if rec {
		return "[recommendation] "
	}
	return ""
}

// Status is how a rule ended.
type Status string

const (
	// Passed: the rule ran and found nothing wrong.
	Passed Status = "pass"
	// Failed: the rule found at least one failure (Outcome.Messages).
	Failed Status = "fail"
	// Skipped: the rule did not run, or stopped before it checked anything
	// (Outcome.SkipReason).
	Skipped Status = "skip"
)

// Outcome is how one rule ended, as Evaluate reports it.
type Outcome struct {
	// Rule is the rule's ID; Recommendation is Rule.Recommendation.
	Rule           string
	Recommendation bool
	// Status is Passed, Failed or Skipped.
	Status Status
	// Messages are the failures, each saying what was observed and what
	// was expected, without the rule ID; empty unless Status is Failed.
	Messages []string
	// SkipReason says why the rule was skipped; empty unless Status is
	// Skipped.
	SkipReason string
	// Logs are the rule's notes (what was not checked and why, cases
	// skipped by Config.Skip), as Run logs them.
	Logs []string
}

// Run runs every rule as a subtest of t named by the rule ID, in the order of
// Rules; a rule whose capability, feature or hook is missing is skipped with
// the reason. Filter rules with go test -run 'TestX/LB-'. Run returns when
// every rule has ended, with the outcome of each rule that ran (a rule left
// out by -run has none); it does not call t.Parallel.
func Run(t *testing.T, cfg Config) []Outcome {
	t.Helper()
	c, err := cfg.normalize()
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	var outs []Outcome
	var raced []string
	for i := range rules {
		rl := &rules[i]
		ok := t.Run(rl.id, func(t *testing.T) {
			o := outcome(rl, execute(t.Context(), c, rl))
			outs = append(outs, o)
			for _, l := range o.Logs {
				t.Log(l)
			}
			switch o.Status {
			case Skipped:
				t.Skip(o.SkipReason)
			case Failed:
				what := "an upstream contract"
				if o.Recommendation {
					what = "a ccmkit recommendation (Config.UpstreamOnly skips it)"
				}
				t.Logf("rule, %s: %s (source: %s)", what, rl.statement, rl.source)
				for _, e := range o.Messages {
					t.Error(mark(o.Recommendation) + e)
				}
			}
		})
		if o := outs[len(outs)-1]; !ok && o.Rule == rl.id && o.Status != Failed {
			// Only the race detector fails a subtest whose rule did not
			// fail: testing reports "race detected during execution of
			// test" for any race in code that ran meanwhile.
			raced = append(raced, fmt.Sprintf("%s (%s)", rl.id, o.Status))
		}
	}
	if len(outs) > 0 {
		t.Log(Summary(outs))
	}
	if len(raced) > 0 {
		t.Logf("conformance: the race detector, not the suite, failed %d subtests whose rules did not fail: %s; the race reports above name the racing code (often the provider's or its vendor's, running in the background); the rules' verdicts are the summary's", len(raced), strings.Join(raced, ", "))
	}
	return outs
}

// Summary renders outs as the suite's verdict: counts of passed, failed
// and skipped rules, then one line per failed rule. Run logs it at the end;
// it is the suite's own verdict, which go test's FAIL lines can exceed
// under -race (see "Concurrency and output" in the package
// documentation).
func Summary(outs []Outcome) string {
	var n [3]int
	var failed []string
	for _, o := range outs {
		switch o.Status {
		case Passed:
			n[0]++
		case Failed:
			n[1]++
			failed = append(failed, "\n  "+o.Rule+": "+mark(o.Recommendation)+firstLine(o.Messages[0]))
		default:
			n[2]++
		}
	}
	return fmt.Sprintf("conformance: %d rules: %d passed, %d failed, %d skipped%s", len(outs), n[0], n[1], n[2], strings.Join(failed, ""))
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// outcome is the Outcome of rule rl that gave res.
func outcome(rl *rule, res result) Outcome {
	o := Outcome{Rule: rl.id, Recommendation: rl.kind == recommendation, Status: Passed, Logs: res.logs}
	switch {
	case len(res.errs) > 0:
		o.Status, o.Messages = Failed, res.errs
	case res.skip != "":
		o.Status, o.SkipReason = Skipped, res.skip
	}
	return o
}

// Check runs every rule, in the order of Rules, and returns every failure
// joined with errors.Join: each joined error is a *Failure naming its rule.
// Skipped rules are not errors. Check returns nil when no rule fails, and an
// error that is not a *Failure when cfg is invalid. It stops early, with
// ctx's error, when ctx is done. Check may run concurrently with other
// calls of Check, Evaluate or Run on other providers: rules share nothing
// but the upstream provider registry, which they only read.
func Check(ctx context.Context, cfg Config) error {
	outs, err := Evaluate(ctx, cfg)
	var errs []error
	for _, o := range outs {
		for _, m := range o.Messages {
			errs = append(errs, &Failure{Rule: o.Rule, Message: m, Recommendation: o.Recommendation})
		}
	}
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Evaluate runs every rule, in the order of Rules, and returns the Outcome
// of each rule that ran or was skipped. The error is nil unless cfg is
// invalid (then no rule runs) or ctx is done (then the outcomes are those of
// the rules that ended before, and the error is ctx's). Evaluate may run
// concurrently as Check may.
func Evaluate(ctx context.Context, cfg Config) ([]Outcome, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	var outs []Outcome
	for i := range rules {
		if err := ctx.Err(); err != nil {
			return outs, err
		}
		rl := &rules[i]
		outs = append(outs, outcome(rl, execute(ctx, c, rl)))
	}
	return outs, nil
}

// Validate reports the first thing wrong with cfg, naming the field, the
// value and what was expected: a nil NewTarget, a negative Timeout,
// MaxStaleness or BusyAfterWrite, inconsistent Claims, an empty or
// repeated Claims.AppProtocols entry, a PortSetting without an annotation
// or two usable values, a malformed or repeated ClusterCIDRs entry, or a
// Skip key that names no rule or case. Run and Check call it
// first; call it yourself to check a Config built outside a test.
func (cfg Config) Validate() error {
	_, err := cfg.normalize()
	return err
}

// normalize validates cfg and fills in defaults.
func (cfg Config) normalize() (*Config, error) {
	c := cfg
	if c.NewTarget == nil {
		return nil, errors.New("Config.NewTarget is nil: expected a constructor of a fresh provider under test")
	}
	if c.ClusterName == "" {
		c.ClusterName = "conformance"
	}
	if c.CrossClusterName == "" {
		c.CrossClusterName = c.ClusterName + "-other"
	}
	if c.CrossClusterName == c.ClusterName {
		return nil, fmt.Errorf("Config.CrossClusterName %q equals ClusterName: expected a different cluster", c.CrossClusterName)
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Timeout < 0 {
		return nil, fmt.Errorf("Config.Timeout %v: expected a positive duration or 0 for the default", c.Timeout)
	}
	if c.MaxStaleness < 0 {
		return nil, fmt.Errorf("Config.MaxStaleness %v: expected the provider's longest cache TTL, or 0", c.MaxStaleness)
	}
	if c.BusyAfterWrite < 0 {
		return nil, fmt.Errorf("Config.BusyAfterWrite %v: expected how long the cloud stays busy after a write, or 0 for never", c.BusyAfterWrite)
	}
	if err := checkAppProtocols(c.Claims.AppProtocols); err != nil {
		return nil, err
	}
	if err := c.PortSetting.check(); err != nil {
		return nil, err
	}
	if c.Claims.MixedProtocols && !c.Claims.UDP {
		// LB-CLAIMED-FEATURES would build a TCP+UDP Service while
		// LB-UNSUPPORTED-REJECTED wants a UDP one rejected.
		return nil, errors.New("Config.Claims.MixedProtocols is true and Claims.UDP false: expected UDP claimed too: a Service of TCP and UDP ports needs UDP")
	}
	if len(c.ClusterCIDRs) == 0 {
		c.ClusterCIDRs = []string{"10.244.0.0/16"}
		if c.Claims.IPv6Routes {
			c.ClusterCIDRs = append(c.ClusterCIDRs, "fd00:10:244::/56")
		}
	}
	if err := checkClusterCIDRs(c.ClusterCIDRs); err != nil {
		return nil, err
	}
	if err := checkSkip(c.Skip); err != nil {
		return nil, err
	}
	if err := checkSplits(c.Claims, c.Unclaimed); err != nil {
		return nil, err
	}
	return &c, nil
}

// claimSplits are the claims split off another: from covered to until
// the suite named it apart.
var claimSplits = []struct{ from, to, what string }{
	{"SourceRanges", "SourceRangesAnnotation", "the service.beta.kubernetes.io/load-balancer-source-ranges annotation, which SourceRanges alone no longer covers (unclaimed, a restricting annotation must be rejected: LB-SOURCE-RANGES)"},
}

// checkSplits checks that every claim split off one claims makes is
// claimed or acknowledged in unclaimed, and that unclaimed names only such
// claims, not claimed ones.
func checkSplits(claims Claims, unclaimed map[string]string) error {
	v := reflect.ValueOf(claims)
	claimed := func(field string) bool { return v.FieldByName(field).Bool() }
	for key := range unclaimed {
		i := slices.IndexFunc(claimSplits, func(sp struct{ from, to, what string }) bool { return sp.to == key })
		switch {
		case i < 0:
			return fmt.Errorf("Config.Unclaimed key %q names no claim split off another: expected one of %q", key, splitNames())
		case claimed(key):
			return fmt.Errorf("Config.Unclaimed key %q is claimed in Config.Claims: expected a claim the provider does not make", key)
		}
	}
	for _, sp := range claimSplits {
		if _, ack := unclaimed[sp.to]; claimed(sp.from) && !claimed(sp.to) && !ack {
			return fmt.Errorf("Config.Claims.%s is claimed, and %s neither claimed nor in Config.Unclaimed: Claims.%s now covers %s: expected Claims.%s set, or Config.Unclaimed[%q] giving the reason the provider does not offer it", sp.from, sp.to, sp.to, sp.what, sp.to, sp.to)
		}
	}
	return nil
}

// splitNames returns the names of the claims split off another.
func splitNames() []string {
	var out []string
	for _, sp := range claimSplits {
		out = append(out, sp.to)
	}
	return out
}

// checkClusterCIDRs checks Config.ClusterCIDRs: canonical CIDRs, each with
// room for 16 pod CIDRs, at most one per IP family.
func checkClusterCIDRs(cidrs []string) error {
	var fams []bool
	for i, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Masked() != p {
			return fmt.Errorf("Config.ClusterCIDRs[%d] %q is not a CIDR in canonical form: expected such as 10.244.0.0/16", i, s)
		}
		limit := 24
		if p.Addr().Is6() {
			limit = 64
		}
		if p.Bits() > limit-4 {
			return fmt.Errorf("Config.ClusterCIDRs[%d] %q is too small: expected room for 16 /%d pod CIDRs", i, s, limit)
		}
		if slices.Contains(fams, p.Addr().Is6()) {
			return fmt.Errorf("Config.ClusterCIDRs[%d] %q repeats an IP family: expected at most one CIDR per family", i, s)
		}
		fams = append(fams, p.Addr().Is6())
	}
	return nil
}

// checkAppProtocols checks Config.Claims.AppProtocols: each entry a
// name, none repeated.
func checkAppProtocols(apps []string) error {
	for i, a := range apps {
		switch {
		case strings.TrimSpace(a) == "":
			return fmt.Errorf("Config.Claims.AppProtocols[%d] %q is empty: expected an application protocol as spec.ports[].appProtocol names it, such as \"http\"", i, a)
		case slices.Contains(apps[:i], a):
			return fmt.Errorf("Config.Claims.AppProtocols[%d] %q repeats an earlier entry: expected each application protocol once", i, a)
		}
	}
	return nil
}

// check checks a Config.PortSetting (nil: none): an annotation name, and
// two different values that can stand in a per-port list.
func (ps *PortSetting) check() error {
	switch {
	case ps == nil:
		return nil
	case strings.TrimSpace(ps.Annotation) == "":
		return fmt.Errorf("Config.PortSetting.Annotation %q is empty: expected the name of the per-port annotation, such as \"lb.example.com/certificate\"", ps.Annotation)
	case ps.Values[0] == ps.Values[1]:
		return fmt.Errorf("Config.PortSetting.Values %q are equal: expected two different values the provider accepts for one port", ps.Values)
	}
	for i, v := range ps.Values {
		if strings.TrimSpace(v) == "" || strings.ContainsAny(v, ",=") {
			return fmt.Errorf("Config.PortSetting.Values[%d] %q: expected a value that is not empty and has no comma or equals sign (the suite writes \"PORT=VALUE\")", i, v)
		}
	}
	return nil
}

// checkSkip checks that every Config.Skip key names a rule, or a case of
// one (RULE/case).
func checkSkip(skip map[string]string) error {
	for key := range skip {
		id, cs, isCase := strings.Cut(key, "/")
		rl := ruleByID(id)
		if rl == nil {
			return fmt.Errorf("Config.Skip key %q names rule %q, which does not exist (see Rules)", key, id)
		}
		if isCase && !slices.Contains(rl.cases(), cs) {
			return fmt.Errorf("Config.Skip key %q names case %q of %s, which does not exist: expected one of %q (see Rule.Cases)", key, cs, id, rl.cases())
		}
	}
	return nil
}

func ruleByID(id string) *rule {
	for i := range rules {
		if rules[i].id == id {
			return &rules[i]
		}
	}
	return nil
}
