package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
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

// Validate reports the first thing wrong with c, naming the field, the
// value and what was expected: a nil NewTarget, a negative Timeout,
// MaxStaleness or BusyAfterWrite, inconsistent Claims, an empty or
// repeated Claims.AppProtocols entry, a PortSetting without an annotation
// or two usable values, a malformed or repeated ClusterCIDRs entry, or a
// Skip key that names no rule or case. Run and Check call it
// first; call it yourself to check a Config built outside a test.
func (c Config) Validate() error {
	_, err := c.normalize()
	return err
}

// normalize validates c and fills in defaults.
func (c Config) normalize() (*Config, error) {
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
