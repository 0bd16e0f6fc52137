package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// brokenInstances returns the broken providers of the InstancesV2 and Zones
// rules: INST-* and ZONES-LOOKUP.
func brokenInstances() []brokenCase {
	type bc = brokenCase
	return narrowed(instOnly, []bc{
		// INST-EXISTS.
		{
			name: "instances-by-name-only", want: "INST-EXISTS", clause: "(true, nil) for running instances, by provider ID",
			also:    []string{"INST-METADATA", "INST-TERMINATED", "INST-SHUTDOWN", "CTRL-NODE-TERMINATED", "CTRL-NODE-SHUTDOWN"}, // every rule that asks about the renamed Node's instance
			reason:  "InstancesV2 ignores spec.providerID and looks instances up by Node name: a Node named unlike its instance (Target.RenamedNodes) is reported gone",
			timeout: brokenTimeout, // the controller rules wait for the renamed Node's checks
			b: instWrap(func(b *wrappedInst) {
				b.exists = func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
					return next.InstanceExists(ctx, byNameOnly(n))
				}
				b.shutdown = func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
					return next.InstanceShutdown(ctx, byNameOnly(n))
				}
				b.metadata = func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
					return next.InstanceMetadata(ctx, byNameOnly(n))
				}
			}),
		},
		{
			name: "exists-false-by-name-while-running", want: "INST-EXISTS", clause: "and by name",
			also:   []string{"INST-NEW-INSTANCE"}, // it asks about a new running instance by name too
			reason: "InstanceExists of a Node without spec.providerID (a NotReady Node a kubelet registered) is (false, nil) for a running instance, so the node lifecycle controller deletes it: the by-name search filters on the states it knows, and spells running \"active\"",
			target: instExistsByState(func(n *v1.Node, exists bool, st instances.State, _ bool) (bool, error) {
				if n.Spec.ProviderID == "" && st == instances.StateRunning {
					return false, nil
				}
				return exists, nil
			}),
		},
		{
			name: "exists-errors-for-unknown-instance", want: "INST-EXISTS", clause: "(false, nil) for one that never existed",
			reason: "an instance the cloud has never heard of (its API answers 404) is an InstanceNotFound error, so the node lifecycle controller never deletes its Node; only an instance listed as terminated is (false, nil)",
			target: instExistsByState(func(n *v1.Node, exists bool, _ instances.State, known bool) (bool, error) {
				if !exists && !known {
					return false, fmt.Errorf("instance of node %s: %w", n.Name, cloudprovider.InstanceNotFound)
				}
				return exists, nil
			}),
		},

		// INST-TERMINATED.
		{
			name: "exists-errors-when-terminated", want: "INST-TERMINATED", clause: "InstanceExists of a terminated instance becomes (false, nil)",
			also:    []string{"CTRL-NODE-TERMINATED"}, // the same answer, through the node lifecycle controller
			reason:  "an instance listed as terminated is an error (\"instance is terminated\") instead of (false, nil): its Node is never deleted",
			timeout: brokenTimeout,
			target: instExistsByState(func(n *v1.Node, exists bool, st instances.State, _ bool) (bool, error) {
				if st == instances.StateTerminated {
					return false, fmt.Errorf("instance of node %s is terminated", n.Name)
				}
				return exists, nil
			}),
		},
		{
			name: "exists-cached-past-cloud-changed", want: "INST-TERMINATED", clause: "within Config.Timeout+MaxStaleness after Hooks.CloudChanged",
			also:    []string{"CTRL-NODE-TERMINATED"}, // the same cached answer, through the node lifecycle controller
			reason:  "InstanceExists answers from a cache with a one-hour TTL that Hooks.CloudChanged does not drop, and Config.MaxStaleness does not declare",
			timeout: brokenTimeout,
			target: wrappedTarget(func(*conformance.Target, *fake.Cloud) wrapped {
				return instExists(instCachedForGood(cloudprovider.InstancesV2.InstanceExists))
			}),
		},
		{
			name: "gone-answer-shared-by-all-nodes", want: "INST-TERMINATED", clause: "other instances still exist",
			also:    []string{"CTRL-NODE-TERMINATED"}, // the same answers, through the node lifecycle controller
			reason:  "\"gone\" is cached for good (a terminated instance never comes back) under a key that leaves out the instance: once one instance is gone, every instance is",
			timeout: brokenTimeout, // CTRL-NODE-TERMINATED waits for checks of Nodes it deleted
			target: wrappedTarget(func(*conformance.Target, *fake.Cloud) wrapped {
				var gone atomic.Bool
				return instExists(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
					if gone.Load() {
						return false, nil
					}
					ok, err := next.InstanceExists(ctx, n)
					if err == nil && !ok {
						gone.Store(true)
					}
					return ok, err
				})
			}),
		},

		// INST-SHUTDOWN.
		{
			name: "shutdown-true-by-name", want: "INST-SHUTDOWN", clause: "InstanceShutdown of a running instance is (false, nil)",
			reason: "InstanceShutdown of a Node without spec.providerID is (true, nil): the by-name path reads a state the name API does not return, and an empty state counts as not running",
			b: instShutdown(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
				if n.Spec.ProviderID == "" {
					return true, nil
				}
				return next.InstanceShutdown(ctx, n)
			}),
		},

		// INST-STOPPED.
		{
			name: "stopped-reported-gone", want: "INST-STOPPED", clause: "A stopped instance still exists",
			also:    []string{"CTRL-NODE-SHUTDOWN"}, // the node lifecycle controller deletes the Node instead of tainting it
			reason:  "InstanceExists is (false, nil) for a stopped instance, so the Node of a merely stopped machine is deleted",
			timeout: brokenTimeout,
			target: instExistsByState(func(_ *v1.Node, exists bool, st instances.State, _ bool) (bool, error) {
				return exists && st != instances.StateStopped, nil
			}),
		},
		{
			name: "stopped-not-shut-down", want: "INST-STOPPED", clause: "and is shut down",
			also:    []string{"CTRL-NODE-SHUTDOWN"}, // the same answer, through the node lifecycle controller
			reason:  "InstanceShutdown is never true: only a state the cloud never reports (\"shutting-down\") counts as shut down, not \"stopped\"",
			timeout: brokenTimeout,
			b: instShutdown(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
				_, err := next.InstanceShutdown(ctx, n)
				return false, err
			}),
		},
		{
			name: "shutdown-sticky", want: "INST-STOPPED", clause: "started again, it is not shut down",
			reason:  "\"shut down\" is cached for good once seen, as if a stopped instance never ran again: a restarted instance stays shut down",
			timeout: brokenTimeout,
			target: wrappedTarget(func(*conformance.Target, *fake.Cloud) wrapped {
				var down sync.Map // node key → true
				return instShutdown(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
					if _, ok := down.Load(instKey(n)); ok {
						return true, nil
					}
					d, err := next.InstanceShutdown(ctx, n)
					if err == nil && d {
						down.Store(instKey(n), true)
					}
					return d, err
				})
			}),
		},
		{
			name: "shutdown-cached-past-cloud-changed", want: "INST-STOPPED", clause: "each change shows within Config.Timeout+MaxStaleness after Hooks.CloudChanged",
			also:    []string{"CTRL-NODE-SHUTDOWN"}, // the same cached answer, through the node lifecycle controller
			reason:  "InstanceShutdown answers from a cache with a one-hour TTL that Hooks.CloudChanged does not drop, and Config.MaxStaleness does not declare",
			timeout: brokenTimeout,
			target: wrappedTarget(func(*conformance.Target, *fake.Cloud) wrapped {
				return instShutdown(instCachedForGood(cloudprovider.InstancesV2.InstanceShutdown))
			}),
		},

		// INST-METADATA.
		{
			name: "metadata-by-name-only", want: "INST-METADATA", clause: "InstanceMetadata, by provider ID",
			reason: "InstanceMetadata ignores spec.providerID and looks the instance up by Node name: a Node named unlike its instance (Target.RenamedNodes) has none",
			b: instMetadata(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
				return next.InstanceMetadata(ctx, byNameOnly(n))
			}),
		},
		{
			name: "metadata-errors-by-name", want: "INST-METADATA", clause: "and by name",
			// The other rules that ask by name (CTRL-NODE-INIT, which
			// registers Nodes by name, is skipped: its precondition fails).
			also:    []string{"INST-NEW-INSTANCE", "INST-ADDRESSES-STABLE"},
			reason:  "InstanceMetadata of a Node without spec.providerID is an error: the provider requires a provider ID, so no kubelet-registered Node is ever initialized",
			timeout: brokenTimeout,
			b: instMetadata(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
				if n.Spec.ProviderID == "" {
					return nil, fmt.Errorf("node %s has no spec.providerID", n.Name)
				}
				return next.InstanceMetadata(ctx, n)
			}),
		},
		{
			name: "metadata-nil-for-renamed-node", want: "INST-METADATA", clause: "is non-nil",
			reason: "InstanceMetadata is (nil, nil), upstream's \"not my node\", for a Node named unlike its instance: the provider takes it for another provider's Node, and the node controller never initializes it",
			target: wrappedTarget(func(_ *conformance.Target, cloud *fake.Cloud) wrapped {
				return instMetadata(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
					if in, ok := cloud.InstanceByID(strings.TrimPrefix(n.Spec.ProviderID, fake.ProviderName+"://")); ok && in.Name != n.Name {
						return nil, nil
					}
					return next.InstanceMetadata(ctx, n)
				})
			}),
		},
		{
			name: "provider-id-from-name", want: "INST-METADATA", clause: "with one ProviderID",
			also:   []string{"CTRL-NODE-INIT"}, // the node controller writes it to the spec.providerID of a Node a kubelet registered
			reason: "looked up by name, InstanceMetadata builds the provider ID from the Node name, so one instance has two provider IDs",
			b: rewriteMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) {
				if n.Spec.ProviderID == "" {
					md.ProviderID = fake.ProviderName + "://" + n.Name
				}
			}),
		},
		{
			name: "provider-id-without-scheme", want: "INST-METADATA", clause: "\"<ProviderName()>://…\"",
			also:   []string{"CTRL-NODE-INIT"}, // the node controller writes it to the spec.providerID of a Node a kubelet registered
			reason: "looked up by name, InstanceMetadata returns the bare instance ID as ProviderID, without the \"fake://\" scheme (and so unlike the one by provider ID)",
			b: rewriteMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) {
				if n.Spec.ProviderID == "" {
					md.ProviderID = strings.TrimPrefix(md.ProviderID, fake.ProviderName+"://")
				}
			}),
		},
		{
			name: "provider-id-rerendered", want: "INST-METADATA", clause: "equal to spec.providerID when set",
			also:   []string{"CTRL-NODE-INIT"}, // the node controller writes it to the spec.providerID of a Node a kubelet registered
			reason: "metadata spells the provider ID differently from the node's spec.providerID",
			b: rewriteMetadata(func(_ *v1.Node, md *cloudprovider.InstanceMetadata) {
				md.ProviderID = strings.Replace(md.ProviderID, "fake://", "fake:///", 1)
			}),
		},
		{
			name: "provider-id-left-to-spec", want: "", // correct: passes every rule
			reason: "InstanceMetadata of a Node with spec.providerID leaves ProviderID empty: the node controller fills it in from spec.providerID (getInstanceMetadata), so this is correct",
			b: rewriteMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) {
				if n.Spec.ProviderID != "" {
					md.ProviderID = ""
				}
			}),
		},
		{
			name: "zone-display-name", want: "INST-METADATA", clause: "label-valid type, zone and region",
			reason: "the zone is the cloud's display name (\"Zone A (Paris)\"), not a label value: the API server rejects the Node update that labels it",
			b: rewriteMetadata(func(_ *v1.Node, md *cloudprovider.InstanceMetadata) {
				md.Zone = "Zone A (Paris)"
			}),
		},
		{
			name: "zone-by-name-from-the-ccm-host", want: "INST-METADATA", clause: "both ways",
			reason: "a look-up by name answers the zone the cloud-controller-manager runs in, not the instance's: a Node initialized by name is labelled with the wrong zone",
			b: rewriteMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) {
				if n.Spec.ProviderID == "" {
					md.Zone = "zone-ccm"
				}
			}),
		},
		{
			name: "metadata-of-missing-instance", want: "INST-METADATA", clause: "a missing instance gets an error",
			reason: "an instance the cloud does not know gets empty metadata (the Node's own provider ID and nothing else) and no error",
			b: instMetadata(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
				md, err := next.InstanceMetadata(ctx, n)
				if errors.Is(err, cloudprovider.InstanceNotFound) {
					return &cloudprovider.InstanceMetadata{ProviderID: n.Spec.ProviderID}, nil
				}
				return md, err
			}),
		},

		// INST-ADDRESSES.
		{
			name: "dns-address-trailing-dot", want: "INST-ADDRESSES", clause: "Node addresses are valid",
			reason: "an InternalDNS address is the cloud's fully qualified name with its trailing dot, which is no DNS-1123 subdomain",
			b: rewriteMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) {
				md.NodeAddresses = append(slices.Clone(md.NodeAddresses), v1.NodeAddress{Type: v1.NodeInternalDNS, Address: n.Name + ".internal."})
			}),
		},
		{
			name: "internal-ip-duplicated", want: "INST-ADDRESSES", clause: "unique",
			reason: "the first InternalIP is listed twice (once per network interface that reports it): the API server rejects duplicate addresses",
			b: rewriteMetadata(func(_ *v1.Node, md *cloudprovider.InstanceMetadata) {
				md.NodeAddresses = append(slices.Clone(md.NodeAddresses), md.NodeAddresses[0])
			}),
		},
		{
			name: "internal-ips-as-external", want: "INST-INTERNAL-IP", clause: "include an InternalIP",
			reason: "every private address is reported as an ExternalIP, so the Node has no InternalIP",
			b: rewriteMetadata(func(_ *v1.Node, md *cloudprovider.InstanceMetadata) {
				md.NodeAddresses = slices.Clone(md.NodeAddresses)
				for i, a := range md.NodeAddresses {
					if a.Type == v1.NodeInternalIP {
						md.NodeAddresses[i].Type = v1.NodeExternalIP
					}
				}
			}),
		},
		{
			name: "ipv6-addresses-dropped", want: "INST-ADDRESSES", clause: "both IP families with Claims.DualStackNodeAddresses",
			reason: "the IPv6 addresses of a dual-stack instance are left out",
			b: rewriteMetadata(func(_ *v1.Node, md *cloudprovider.InstanceMetadata) {
				md.NodeAddresses = slices.DeleteFunc(slices.Clone(md.NodeAddresses), func(a v1.NodeAddress) bool {
					ip, err := netip.ParseAddr(a.Address)
					return err == nil && ip.Is6()
				})
			}),
		},

		// INST-ADDRESSES-STABLE.
		{
			name: "hostname-address-flaps", want: "INST-ADDRESSES-STABLE", clause: "the same node addresses",
			also:   []string{"INST-CONCURRENT"}, // it compares answers with the first one too, and they vary
			reason: "every other look-up by provider ID of a node leaves out its Hostname address (read from a second, flaky API)",
			target: wrappedTarget(func(*conformance.Target, *fake.Cloud) wrapped {
				var calls counter
				return rewriteMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) {
					if n.Spec.ProviderID != "" && calls.add(n.Name)%2 == 0 {
						md.NodeAddresses = slices.DeleteFunc(slices.Clone(md.NodeAddresses), func(a v1.NodeAddress) bool { return a.Type == v1.NodeHostName })
					}
				})
			}),
		},
		{
			name: "addresses-rotate-per-call", want: "INST-ADDRESSES-STABLE", clause: "in the same order on every call",
			also:   []string{"INST-CONCURRENT"}, // it compares answers with the first one too, and they vary
			reason: "the addresses come in another order on every InstanceMetadata call of a node (the cloud API's order is unspecified and the provider does not sort)",
			target: wrappedTarget(func(*conformance.Target, *fake.Cloud) wrapped {
				var calls counter
				return rewriteMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) {
					addrs := slices.Clone(md.NodeAddresses)
					k := calls.add(n.Name) % max(len(addrs), 1)
					md.NodeAddresses = append(addrs[k:], addrs[:k]...)
				})
			}),
		},
		{
			name: "addresses-reordered-by-name", want: "INST-ADDRESSES-STABLE", clause: "by provider ID and by name",
			reason: "a look-up by name returns the addresses in another order than a look-up by provider ID",
			b: rewriteMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) {
				if n.Spec.ProviderID == "" {
					md.NodeAddresses = slices.Clone(md.NodeAddresses)
					slices.Reverse(md.NodeAddresses)
				}
			}),
		},

		// INST-PROVIDED-NODE-IP.
		{
			name: "provided-node-ip-first-only", want: "INST-PROVIDED-NODE-IP", clause: "Every IP of a node's alpha.kubernetes.io/provided-node-ip annotation is among its addresses",
			reason: "the provider reads the provided-node-ip annotation as one IP and keeps only the address equal to its first entry, dropping the other family's that the kubelet also asked for",
			b: rewriteMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) {
				first, _, _ := strings.Cut(n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr], ",")
				if first == "" {
					return
				}
				md.NodeAddresses = slices.DeleteFunc(slices.Clone(md.NodeAddresses), func(a v1.NodeAddress) bool {
					_, err := netip.ParseAddr(a.Address)
					return err == nil && a.Address != first
				})
			}),
		},

		// INST-LABELS.
		{
			name: "label-key-from-tag", want: "INST-LABELS", clause: "AdditionalLabels have valid keys",
			reason: "a cloud tag becomes a label under its own name, \"example.com/cost center\", which is no label key",
			b:      instLabel("example.com/cost center", "r-and-d"),
		},
		{
			name: "label-value-from-tag", want: "INST-LABELS", clause: "and values",
			reason: "a cloud tag's value becomes a label value as is, \"general purpose\", which is no label value",
			b:      instLabel("example.com/pool", "general purpose"),
		},
		{
			name: "kubernetes-io-labels", want: "INST-LABELS", clause: "none under kubernetes.io or k8s.io",
			reason: "an additional label under node.kubernetes.io, which the node controller discards",
			b:      instLabel("node.kubernetes.io/pool", "general"),
		},

		// INST-NEW-INSTANCE.
		{
			name: "new-instance-gone-from-stale-list", want: "INST-NEW-INSTANCE", clause: "never reported (false, nil), neither before",
			reason: "an instance missing from the provider's cached list is taken for gone without asking the cloud, so a new Node is deleted before the cache learns of it",
			target: staleListTarget,
		},
		{
			name: "new-instance-gone-after-lagging-relist", want: "INST-NEW-INSTANCE", clause: "nor after Hooks.CloudChanged",
			reason: "on Hooks.CloudChanged the provider re-lists from an eventually consistent list API that does not show new instances yet, and then trusts that list: an instance missing from it is (false, nil)",
			target: wrappedTarget(func(tgt *conformance.Target, cloud *fake.Cloud) wrapped {
				initial := cloud.Snapshot().Instances
				var relisted atomic.Bool
				tgt.Hooks.CloudChanged = func(context.Context) error {
					relisted.Store(true)
					return nil
				}
				return instExists(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
					if relisted.Load() && !slices.ContainsFunc(initial, instOf(n)) {
						return false, nil
					}
					return next.InstanceExists(ctx, n)
				})
			}),
		},
		{
			name: "new-instance-no-metadata", want: "INST-NEW-INSTANCE", clause: "has metadata within Config.Timeout+MaxStaleness after it",
			reason:  "InstanceMetadata answers from the instance list read when the provider started, which nothing refreshes: an instance created since has no metadata",
			timeout: brokenTimeout,
			target: wrappedTarget(func(_ *conformance.Target, cloud *fake.Cloud) wrapped {
				initial := cloud.Snapshot().Instances
				return instMetadata(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
					if !slices.ContainsFunc(initial, instOf(n)) {
						return nil, fmt.Errorf("instance of node %s: %w", n.Name, cloudprovider.InstanceNotFound)
					}
					return next.InstanceMetadata(ctx, n)
				})
			}),
		},

		// INST-OUTAGE.
		{
			name: "exists-false-on-error", want: "INST-OUTAGE", clause: "When the cloud API fails, InstanceExists of an existing instance is an error (or true), never (false, nil)",
			reason: "any cloud error from the look-up is taken for \"instance gone\"",
			b: instExists(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
				ok, err := next.InstanceExists(ctx, n)
				if err != nil && ctx.Err() == nil {
					return false, nil
				}
				return ok, err
			}),
		},

		// INST-CONCURRENT.
		{
			name: "shutdown-one-call-at-a-time", want: "INST-CONCURRENT", clause: "Concurrent instance calls all succeed",
			reason: "InstanceShutdown goes through a client that serves one request at a time and fails the others (\"request in progress\") instead of queueing them",
			target: wrappedTarget(func(*conformance.Target, *fake.Cloud) wrapped {
				var busy atomic.Bool
				return instShutdown(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
					if !busy.CompareAndSwap(false, true) {
						return false, fmt.Errorf("InstanceShutdown(%s): another request is in progress", n.Name)
					}
					defer busy.Store(false)
					time.Sleep(instRoundTrip)
					return next.InstanceShutdown(ctx, n)
				})
			}),
		},
		{
			name: "metadata-coalesced-without-addresses", want: "INST-CONCURRENT", clause: "with the answers of sequential calls",
			reason: "concurrent InstanceMetadata calls for one provider ID are coalesced, and the calls that join one in flight get a summary of its answer, without the node addresses",
			target: wrappedTarget(func(*conformance.Target, *fake.Cloud) wrapped {
				var flights instFlights
				return instMetadata(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
					if n.Spec.ProviderID == "" { // by name: not coalesced
						return next.InstanceMetadata(ctx, n)
					}
					md, err, joined := flights.do(n.Spec.ProviderID, func() (*cloudprovider.InstanceMetadata, error) {
						time.Sleep(instRoundTrip)
						return next.InstanceMetadata(ctx, n)
					})
					if joined && md != nil {
						c := *md
						c.NodeAddresses = nil
						md = &c
					}
					return md, err
				})
			}),
		},

		// ZONES-LOOKUP, on the fake with a correct Zones added (zonesTarget).
		{
			name: "zone-by-provider-id-default", want: "ZONES-LOOKUP", clause: "GetZoneByProviderID and GetZoneByNodeName agree with each other",
			reason: "GetZoneByProviderID answers the region's default zone for every instance, while GetZoneByNodeName answers the instance's own",
			claims: zonesClaimed, target: zonesTarget(false),
			b: zonesIn("zone-a", ""),
		},
		{
			name: "zone-display-name-legacy", want: "ZONES-LOOKUP", clause: "with label-valid zone and region",
			reason: "a provider without InstancesV2 (the kind whose Zones the node controller calls) answers the zone's display name (\"Zone A (Paris)\"), which is no label value",
			claims: func(c *conformance.Claims) { c.InstancesV2, c.Zones = false, true },
			target: zonesTarget(true),
			b:      zonesIn("Zone A (Paris)", "Zone A (Paris)"),
		},
	})
}

// clausesInstances returns the clauses of the statements of the rules of this
// file, each quoted from its statement (see TestBrokenCoverage).
func clausesInstances() map[string][]string {
	return map[string][]string{
		"INST-EXISTS": {"(true, nil) for running instances, by provider ID", "and by name", "(false, nil) for one that never existed"},
		"INST-TERMINATED": {"InstanceExists of a terminated instance becomes (false, nil)",
			"within Config.Timeout+MaxStaleness after Hooks.CloudChanged", "other instances still exist"},
		"INST-SHUTDOWN": {"InstanceShutdown of a running instance is (false, nil)"},
		"INST-STOPPED": {"A stopped instance still exists", "and is shut down", "started again, it is not shut down",
			"each change shows within Config.Timeout+MaxStaleness after Hooks.CloudChanged"},
		"INST-METADATA": {"InstanceMetadata, by provider ID", "and by name", "is non-nil", "with one ProviderID",
			"\"<ProviderName()>://…\"", "equal to spec.providerID when set", "label-valid type, zone and region",
			"both ways", "a missing instance gets an error"},
		"INST-ADDRESSES":        {"Node addresses are valid", "unique", "both IP families with Claims.DualStackNodeAddresses"},
		"INST-INTERNAL-IP":      {"include an InternalIP"},
		"INST-ADDRESSES-STABLE": {"the same node addresses", "in the same order on every call", "by provider ID and by name"},
		"INST-PROVIDED-NODE-IP": {"Every IP of a node's alpha.kubernetes.io/provided-node-ip annotation is among its addresses"},
		"INST-LABELS":           {"AdditionalLabels have valid keys", "and values", "none under kubernetes.io or k8s.io"},
		"INST-NEW-INSTANCE":     {"never reported (false, nil), neither before", "nor after Hooks.CloudChanged", "has metadata within Config.Timeout+MaxStaleness after it"},
		"INST-OUTAGE":           {"When the cloud API fails, InstanceExists of an existing instance is an error (or true), never (false, nil)"},
		"INST-CONCURRENT":       {"Concurrent instance calls all succeed", "with the answers of sequential calls"},
		"ZONES-LOOKUP":          {"GetZoneByProviderID and GetZoneByNodeName agree with each other", "with label-valid zone and region"},
	}
}

// instOnly narrows the claims of every broken provider of this file (see
// narrowed), and of those of the provider area that make instance rules
// wait, to the instance rules (and the controller and every-capability rules over
// them): the load-balancer and route rules ask InstancesV2 only about
// fixture nodes without a provider ID or addresses (initNodes,
// ROUTE-TARGET-ADDRESSES), which the fake's are not, and never ask Zones,
// so an instance or zones breakage cannot reach them. Narrowed, a case
// runs in a fraction of the time (about 1 s instead of 2 to 5 s with
// -race).
func instOnly(c *conformance.Claims) { c.LoadBalancer, c.Routes = false, false }

// instRoundTrip is how long a call of the concurrency-broken providers
// keeps its resource: long enough for INST-CONCURRENT's goroutines, which
// start together, to meet inside it.
const instRoundTrip = 5 * time.Millisecond

// instExists, instShutdown and instMetadata are providers whose
// InstanceExists, InstanceShutdown or InstanceMetadata is f.
func instExists(f func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error)) wrapped {
	return instWrap(func(b *wrappedInst) { b.exists = f })
}

func instShutdown(f func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error)) wrapped {
	return instWrap(func(b *wrappedInst) { b.shutdown = f })
}

func instMetadata(f func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error)) wrapped {
	return instWrap(func(b *wrappedInst) { b.metadata = f })
}

// instExistsByState returns a NewTarget whose InstanceExists answers, for
// each of its successful answers exists about a Node n, what answer
// returns, given the state st of n's instance in the fake (known false:
// the fake has never heard of it, see instState).
func instExistsByState(answer func(n *v1.Node, exists bool, st instances.State, known bool) (bool, error)) func(context.Context) (*conformance.Target, error) {
	return wrappedTarget(func(_ *conformance.Target, cloud *fake.Cloud) wrapped {
		return instExists(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
			exists, err := next.InstanceExists(ctx, n)
			if err != nil {
				return exists, err
			}
			st, known := instState(cloud, n)
			return answer(n, exists, st, known)
		})
	})
}

// instLabel is a provider whose InstanceMetadata adds the label k=v to
// AdditionalLabels.
func instLabel(k, v string) wrapped {
	return rewriteMetadata(func(_ *v1.Node, md *cloudprovider.InstanceMetadata) {
		labels := map[string]string{k: v}
		for lk, lv := range md.AdditionalLabels {
			labels[lk] = lv
		}
		md.AdditionalLabels = labels
	})
}

// instOf returns whether a fake instance is n's: by spec.providerID when n
// has one, else by name.
func instOf(n *v1.Node) func(fake.Instance) bool {
	if id, ok := strings.CutPrefix(n.Spec.ProviderID, fake.ProviderName+"://"); ok {
		return func(in fake.Instance) bool { return in.ID == id }
	}
	return func(in fake.Instance) bool { return in.Name == n.Name }
}

// instState returns the state of n's instance in cloud (running for the
// zero state); ok is false when the cloud has never heard of it.
func instState(cloud *fake.Cloud, n *v1.Node) (st instances.State, ok bool) {
	list := cloud.Snapshot().Instances
	i := slices.IndexFunc(list, instOf(n))
	if i < 0 {
		return instances.StateRunning, false
	}
	return list[i].State, true
}

// instKey is the key a provider's cache keeps n's answers under: its
// provider ID, else its name.
func instKey(n *v1.Node) string {
	if n.Spec.ProviderID != "" {
		return n.Spec.ProviderID
	}
	return "name:" + n.Name
}

// instAnswers caches a provider's successful answers per node for good, as
// a cache whose TTL is longer than any rule: what a provider that neither
// drops its caches in Hooks.CloudChanged nor declares Config.MaxStaleness
// looks like. It is safe for concurrent use.
type instAnswers[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// get returns n's cached answer, or asks ask and caches its answer when it
// is not an error.
func (c *instAnswers[T]) get(n *v1.Node, ask func() (T, error)) (T, error) {
	c.mu.Lock()
	v, ok := c.m[instKey(n)]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := ask()
	if err == nil {
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]T{}
		}
		c.m[instKey(n)] = v
		c.mu.Unlock()
	}
	return v, err
}

// instCachedForGood returns an InstanceExists or InstanceShutdown (ask,
// which it calls on next) that answers from an instAnswers of its own.
func instCachedForGood(ask func(cloudprovider.InstancesV2, context.Context, *v1.Node) (bool, error)) func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
	var cache instAnswers[bool]
	return func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
		return cache.get(n, func() (bool, error) { return ask(next, ctx, n) })
	}
}

// instFlights coalesces concurrent calls by key: a call made while another
// of its key is in flight waits for that one's answer. It is safe for
// concurrent use.
type instFlights struct {
	mu sync.Mutex
	m  map[string]*instFlight
}

type instFlight struct {
	done chan struct{}
	md   *cloudprovider.InstanceMetadata
	err  error
}

// do runs f, or waits for the call of key in flight; joined reports the
// latter.
func (fs *instFlights) do(key string, f func() (*cloudprovider.InstanceMetadata, error)) (md *cloudprovider.InstanceMetadata, err error, joined bool) {
	fs.mu.Lock()
	if fl, ok := fs.m[key]; ok {
		fs.mu.Unlock()
		<-fl.done
		return fl.md, fl.err, true
	}
	fl := &instFlight{done: make(chan struct{})}
	if fs.m == nil {
		fs.m = map[string]*instFlight{}
	}
	fs.m[key] = fl
	fs.mu.Unlock()
	fl.md, fl.err = f()
	fs.mu.Lock()
	delete(fs.m, key)
	fs.mu.Unlock()
	close(fl.done)
	return fl.md, fl.err, false
}

// zonesClaimed adds the Zones claim to the fake's.
func zonesClaimed(c *conformance.Claims) { c.Zones = true }

// zonesTarget returns a NewTarget: newFakeTarget whose Cloud also offers a
// correct Zones (instZones, over the fake's InstancesV2), the base of the
// ZONES-LOOKUP broken providers. withoutV2 hides the fake's InstancesV2,
// as a provider of the legacy kind (Zones without InstancesV2) does.
func zonesTarget(withoutV2 bool) func(context.Context) (*conformance.Target, error) {
	return targetWith(func(tgt *conformance.Target) error {
		inst, ok := tgt.Cloud.InstancesV2()
		if !ok {
			return errors.New("the fake offers no InstancesV2 to derive Zones from")
		}
		w := &wrapped{Interface: tgt.Cloud, zones: func(cloudprovider.Zones) cloudprovider.Zones { return instZones{inst} }}
		tgt.Cloud = w
		if withoutV2 {
			tgt.Cloud = providerWithout{wrapped: w, instancesV2: true}
		}
		return nil
	})
}

// instZones is a correct Zones over an InstancesV2: each zone is the
// instance's InstanceMetadata zone and region. It is safe for concurrent
// use if inst is.
type instZones struct{ inst cloudprovider.InstancesV2 }

var _ cloudprovider.Zones = instZones{}

// GetZone answers cloudprovider.NotImplemented: a cloud-controller-manager
// runs on no particular instance.
func (instZones) GetZone(context.Context) (cloudprovider.Zone, error) {
	return cloudprovider.Zone{}, cloudprovider.NotImplemented
}

func (z instZones) GetZoneByProviderID(ctx context.Context, providerID string) (cloudprovider.Zone, error) {
	return z.of(ctx, &v1.Node{Spec: v1.NodeSpec{ProviderID: providerID}})
}

func (z instZones) GetZoneByNodeName(ctx context.Context, name types.NodeName) (cloudprovider.Zone, error) {
	n := &v1.Node{}
	n.Name = string(name)
	return z.of(ctx, n)
}

func (z instZones) of(ctx context.Context, n *v1.Node) (cloudprovider.Zone, error) {
	md, err := z.inst.InstanceMetadata(ctx, n)
	if err != nil {
		return cloudprovider.Zone{}, err
	}
	if md == nil {
		return cloudprovider.Zone{}, fmt.Errorf("no metadata for node %q (provider ID %q)", n.Name, n.Spec.ProviderID)
	}
	return cloudprovider.Zone{FailureDomain: md.Zone, Region: md.Region}, nil
}

// zonesIn breaks the provider's Zones (when offered): the successful
// answers of GetZoneByProviderID have the failure domain byID, and those
// of GetZoneByNodeName byName, where not empty, instead of the instance's.
func zonesIn(byID, byName string) wrapped {
	return wrapped{zones: func(z cloudprovider.Zones) cloudprovider.Zones {
		if z == nil {
			return nil
		}
		return zonesBroken{Zones: z, byID: byID, byName: byName}
	}}
}

// zonesBroken is the Zones of zonesIn.
type zonesBroken struct {
	cloudprovider.Zones
	byID, byName string
}

func (z zonesBroken) GetZoneByProviderID(ctx context.Context, providerID string) (cloudprovider.Zone, error) {
	zone, err := z.Zones.GetZoneByProviderID(ctx, providerID)
	if err == nil && z.byID != "" {
		zone.FailureDomain = z.byID
	}
	return zone, err
}

func (z zonesBroken) GetZoneByNodeName(ctx context.Context, name types.NodeName) (cloudprovider.Zone, error) {
	zone, err := z.Zones.GetZoneByNodeName(ctx, name)
	if err == nil && z.byName != "" {
		zone.FailureDomain = z.byName
	}
	return zone, err
}
