package conformance

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	cloudprovider "k8s.io/cloud-provider"
	nodehelpers "k8s.io/cloud-provider/node/helpers"
)

// mustMetadata is InstanceMetadata as a precondition: when it fails, the
// rule is skipped and INST-METADATA reports the problem, once.
func (r *rt) mustMetadata(inst cloudprovider.InstancesV2, n *v1.Node) *cloudprovider.InstanceMetadata {
	md, err := inst.InstanceMetadata(r.ctx, n)
	if err != nil || md == nil {
		r.Skipf("precondition failed: InstanceMetadata(%s) = (%v, %v): see INST-METADATA", n.Name, md, err)
	}
	return md
}

// providerIDOf is the provider ID the node controller takes from md, the
// InstanceMetadata of n: md.ProviderID, or n's spec.providerID when md
// leaves it empty (controllers/node/node_controller.go getInstanceMetadata
// fills it in; by name, with neither, it fails the node's initialization).
func providerIDOf(n *v1.Node, md *cloudprovider.InstanceMetadata) string {
	if md.ProviderID != "" {
		return md.ProviderID
	}
	return n.Spec.ProviderID
}

// lookup is a node as the controllers present it, and how it is looked up.
type lookup struct {
	how  string
	node *v1.Node
}

// lookups returns a fixture node as the controllers present it: as given and,
// when it has a provider ID and is not one of Target.RenamedNodes, without
// it (looked up by name).
func (r *rt) lookups(n *v1.Node) []lookup {
	switch {
	case n.Spec.ProviderID == "":
		return []lookup{{"by name", n}}
	case r.renamed(n):
		return []lookup{{"by provider ID", n}}
	}
	return []lookup{{"by provider ID", n}, {"by name", byName(n)}}
}

// warmUp asks about n, every way the rule will, before the rule changes
// its instance: the controllers have been asking all along, so a provider
// with caches holds n's current state when the change comes. The answers
// are other rules' business (INST-EXISTS, INST-SHUTDOWN).
func (r *rt) warmUp(inst cloudprovider.InstancesV2, n *v1.Node) {
	for _, l := range r.lookups(n) {
		_, _ = inst.InstanceExists(r.ctx, l.node)
		_, _ = inst.InstanceShutdown(r.ctx, l.node)
	}
}

func ruleInstExists(r *rt) {
	inst := r.inst()
	nodes := r.nodes(1)
	for _, n := range nodes {
		for _, l := range r.lookups(n) {
			ok, err := inst.InstanceExists(r.ctx, l.node)
			if err != nil || !ok {
				r.Errorf("InstanceExists(%s) %s = (%v, %v), expected (true, nil) for a running instance", n.Name, l.how, ok, err)
			}
		}
	}
	pid := nodes[0].Spec.ProviderID
	if md, err := inst.InstanceMetadata(r.ctx, nodes[0]); err == nil && md != nil && md.ProviderID != "" {
		pid = md.ProviderID
	}
	missing := missingNode(pid)
	for _, l := range r.lookups(missing) {
		ok, err := inst.InstanceExists(r.ctx, l.node)
		if err != nil || ok {
			r.Errorf("InstanceExists(%s, providerID %q) %s of an instance that never existed = (%v, %v), expected (false, nil): the node lifecycle controller could never delete its Node", l.node.Name, l.node.Spec.ProviderID, l.how, ok, err)
		}
	}
}

func ruleInstTerminated(r *rt) {
	inst := r.inst()
	r.needHook("TerminateInstance", r.target().Hooks.TerminateInstance)
	nodes := r.nodes(1)
	victim := nodes[0]
	r.warmUp(inst, victim)
	r.changeCloud("TerminateInstance", r.target().Hooks.TerminateInstance, victim)
	for _, l := range r.lookups(victim) {
		r.eventuallyChanged(fmt.Sprintf("InstanceExists(%s) %s of a terminated instance to be (false, nil)", victim.Name, l.how), func() (bool, string) {
			ok, err := inst.InstancesV2.InstanceExists(r.ctx, l.node) // polled: an api.RetryError is "not yet"
			return !ok && err == nil, fmt.Sprintf("(%v, %v)", ok, err)
		})
	}
	for _, n := range nodes[1:] {
		if ok, err := inst.InstanceExists(r.ctx, n); err != nil || !ok {
			r.Errorf("InstanceExists(%s) of a running instance after another was terminated = (%v, %v), expected (true, nil)", n.Name, ok, err)
		}
	}
}

func ruleInstShutdown(r *rt) {
	inst := r.inst()
	for _, n := range r.nodes(1) {
		for _, l := range r.lookups(n) {
			down, err := inst.InstanceShutdown(r.ctx, l.node)
			if err != nil || down {
				r.Errorf("InstanceShutdown(%s) %s of a running instance = (%v, %v), expected (false, nil)", n.Name, l.how, down, err)
			}
		}
	}
}

func ruleInstStopped(r *rt) {
	inst := r.inst()
	h := r.target().Hooks
	r.needHook("StopInstance", h.StopInstance)
	n := r.nodes(1)[0]
	r.warmUp(inst, n)
	r.changeCloud("StopInstance", h.StopInstance, n)
	r.eventuallyChanged(fmt.Sprintf("InstanceShutdown(%s) of a stopped instance to be (true, nil)", n.Name), func() (bool, string) {
		down, err := inst.InstancesV2.InstanceShutdown(r.ctx, n) // polled: an api.RetryError is "not yet"
		return down && err == nil, fmt.Sprintf("(%v, %v)", down, err)
	})
	for _, l := range r.lookups(n) {
		if ok, err := inst.InstanceExists(r.ctx, l.node); err != nil || !ok {
			r.Errorf("InstanceExists(%s) %s of a stopped instance = (%v, %v), expected (true, nil): (false, nil) deletes the Node of a merely stopped machine", n.Name, l.how, ok, err)
		}
	}
	if h.StartInstance == nil {
		r.Logf("Hooks.StartInstance is nil: restarting was not checked")
		return
	}
	r.changeCloud("StartInstance", h.StartInstance, n)
	r.eventuallyChanged(fmt.Sprintf("InstanceShutdown(%s) of a restarted instance to be (false, nil)", n.Name), func() (bool, string) {
		down, err := inst.InstancesV2.InstanceShutdown(r.ctx, n) // polled: an api.RetryError is "not yet"
		return !down && err == nil, fmt.Sprintf("(%v, %v)", down, err)
	})
}

func ruleInstMetadata(r *rt) {
	inst := r.inst()
	prefix := r.target().Cloud.ProviderName() + "://"
	nodes := r.nodes(1)
	// key is what the node controller takes from InstanceMetadata for the
	// Node's spec and labels, the same by provider ID and by name.
	type key struct{ ProviderID, InstanceType, Zone, Region string }
	for _, n := range nodes {
		var first *key
		for _, l := range r.lookups(n) {
			md, err := inst.InstanceMetadata(r.ctx, l.node)
			if err != nil || md == nil {
				r.Errorf("InstanceMetadata(%s) %s = (%v, %v), expected metadata for a running instance", n.Name, l.how, md, err)
				continue
			}
			pid := providerIDOf(l.node, md)
			if !strings.HasPrefix(pid, prefix) || len(pid) == len(prefix) {
				r.Errorf("InstanceMetadata(%s) %s: ProviderID %q, expected %q followed by the instance ID", n.Name, l.how, md.ProviderID, prefix)
			}
			// Against the node as looked up: by name it has no provider ID,
			// and what the node controller then writes to spec.providerID
			// (getNodeModifiersFromCloudProvider) must be the one of the
			// look-up by provider ID, compared below.
			if l.node.Spec.ProviderID != "" && pid != l.node.Spec.ProviderID {
				r.Errorf("InstanceMetadata(%s) %s: ProviderID %q differs from spec.providerID %q, expected them equal (or empty)", n.Name, l.how, md.ProviderID, l.node.Spec.ProviderID)
			}
			for _, p := range labelValueProblems("InstanceType", md.InstanceType) {
				r.Errorf("InstanceMetadata(%s): %s", n.Name, p)
			}
			for _, p := range labelValueProblems("Zone", md.Zone) {
				r.Errorf("InstanceMetadata(%s): %s", n.Name, p)
			}
			for _, p := range labelValueProblems("Region", md.Region) {
				r.Errorf("InstanceMetadata(%s): %s", n.Name, p)
			}
			k := key{pid, md.InstanceType, md.Zone, md.Region}
			if first == nil {
				first = &k
				continue
			}
			if d := cmp.Diff(*first, k); d != "" {
				r.Errorf("InstanceMetadata(%s) by provider ID and by name disagree (-by provider ID +by name):\n%s", n.Name, d)
			}
		}
	}
	missing := missingNode(nodes[0].Spec.ProviderID)
	for _, l := range r.lookups(missing) {
		md, err := inst.InstanceMetadata(r.ctx, l.node)
		if err == nil && md != nil {
			r.Errorf("InstanceMetadata(%s, providerID %q) %s of an instance that never existed returned %+v and no error, expected an error", l.node.Name, l.node.Spec.ProviderID, l.how, *md)
		}
	}
}

func ruleInstAddresses(r *rt) {
	inst := r.inst()
	for _, n := range r.nodes(1) {
		first := r.mustMetadata(inst, n)
		for _, p := range addressProblems(first.NodeAddresses, r.cfg.Claims.DualStackNodeAddresses) {
			r.Errorf("InstanceMetadata(%s).NodeAddresses: %s", n.Name, p)
		}
	}
}

func ruleInstInternalIP(r *rt) {
	inst := r.inst()
	for _, n := range r.nodes(1) {
		addrs := r.mustMetadata(inst, n).NodeAddresses
		if !slices.ContainsFunc(addrs, func(a v1.NodeAddress) bool {
			_, err := netip.ParseAddr(a.Address) // its validity is INST-ADDRESSES'
			return a.Type == v1.NodeInternalIP && err == nil
		}) {
			r.Errorf("InstanceMetadata(%s).NodeAddresses %v has no InternalIP, expected one: the Node's IP would be its first ExternalIP (k8s.io/kubernetes pkg/util/node GetNodeHostIPs)", n.Name, addrs)
		}
	}
}

func ruleInstAddressesStable(r *rt) {
	inst := r.inst()
	for _, n := range r.nodes(1) {
		first := r.mustMetadata(inst, n)
		for i, l := range append(r.lookups(n), r.lookups(n)...) {
			md, err := inst.InstanceMetadata(r.ctx, l.node)
			if err != nil || md == nil {
				r.Errorf("InstanceMetadata(%s) %s, call #%d = (%v, %v)", n.Name, l.how, i+2, md, err)
				continue
			}
			if d := cmp.Diff(first.NodeAddresses, md.NodeAddresses, cmpOpts); d != "" {
				r.Errorf("InstanceMetadata(%s) %s, call #%d returned the addresses in another order or set (-call #1 +now): the Node's primary IP (its first InternalIP of a family) may change with the next rewrite\n%s", n.Name, l.how, i+2, d)
			}
		}
	}
}

func ruleInstProvidedNodeIP(r *rt) {
	inst := r.inst()
	for _, n := range r.nodes(1) {
		ann := n.Annotations[providedNodeIP]
		node := n
		if ann == "" {
			md := r.mustMetadata(inst, n)
			ip4, ok4 := firstIP(md.NodeAddresses, false)
			ip6, ok6 := firstIP(md.NodeAddresses, true)
			switch {
			case ok4 && ok6 && r.cfg.Claims.DualStackNodeAddresses:
				ann = ip4 + "," + ip6
			case ok4:
				ann = ip4
			case ok6:
				ann = ip6
			default:
				r.Skipf("precondition failed: InstanceMetadata(%s) has no InternalIP: see INST-ADDRESSES", n.Name)
			}
			node = n.DeepCopy()
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			node.Annotations[providedNodeIP] = ann
		}
		md, err := inst.InstanceMetadata(r.ctx, node)
		if err != nil || md == nil {
			r.Errorf("InstanceMetadata(%s) with annotation %s=%q = (%v, %v), expected metadata", n.Name, providedNodeIP, ann, md, err)
			continue
		}
		if _, err := nodehelpers.GetNodeAddressesFromNodeIP(ann, md.NodeAddresses); err != nil {
			r.Errorf("InstanceMetadata(%s) with annotation %s=%q: %v (addresses %v): the node controller would never initialize the node", n.Name, providedNodeIP, ann, err, md.NodeAddresses)
		}
	}
}

// k8sNamespace matches label keys the node controller discards
// (controllers/node/node_controller.go getNodeModifiersFromCloudProvider).
// A test oracle: it repeats upstream's expression on purpose rather than
// use ccmkit's own check (internal/nodelabel), so that a bug there cannot
// hide from the suite that judges providers built with it.
var k8sNamespace = regexp.MustCompile(`(^|\.)(kubernetes|k8s)\.io/`)

func ruleInstLabels(r *rt) {
	inst := r.inst()
	for _, n := range r.nodes(1) {
		md := r.mustMetadata(inst, n)
		for k, v := range md.AdditionalLabels {
			for _, m := range content.IsLabelKey(k) {
				r.Errorf("InstanceMetadata(%s).AdditionalLabels key %q is not a valid label key: %s", n.Name, k, m)
			}
			for _, p := range labelValueProblems(fmt.Sprintf("AdditionalLabels[%q]", k), v) {
				r.Errorf("InstanceMetadata(%s): %s", n.Name, p)
			}
			if k8sNamespace.MatchString(k) {
				r.Errorf("InstanceMetadata(%s).AdditionalLabels key %q is under kubernetes.io or k8s.io: the node controller discards it, expected a key under the provider's own domain", n.Name, k)
			}
		}
	}
}

func ruleInstNewInstance(r *rt) {
	inst := r.inst()
	create := r.target().Hooks.CreateInstance
	r.needHook("CreateInstance", create)
	for _, n := range r.nodes(1) {
		r.mustMetadata(inst, n) // warm any cache
	}
	name := "conformance-new-" + string(uuid.NewUUID())[:8]
	n, err := create(r.ctx, name)
	if err != nil || n == nil {
		r.Fatalf("Hooks.CreateInstance(%q) = (%v, %v)", name, n, err)
	}
	n = n.DeepCopy()
	// Asked before Hooks.CloudChanged, as the node lifecycle controller asks
	// about a new, still NotReady Node (MonitorNodes) before any provider
	// cache learns of its instance: a cache must ask the cloud before it
	// says "gone", never take "not in my list" for it.
	for _, l := range r.lookups(n) {
		if ok, err := inst.InstanceExists(r.ctx, l.node); !ok && err == nil {
			r.Errorf("InstanceExists(%s) %s of an instance created after the provider's caches were filled = (false, nil): the node lifecycle controller deletes a new, still NotReady Node at once: expected (true, nil), or an error while unsure", n.Name, l.how)
		}
	}
	r.cloudChanged("CreateInstance")
	for _, l := range r.lookups(n) {
		if ok, err := inst.InstanceExists(r.ctx, l.node); !ok && err == nil {
			r.Errorf("InstanceExists(%s) %s of a just created instance = (false, nil): the node lifecycle controller deletes a new, still NotReady Node at once: expected (true, nil), or an error while unsure", n.Name, l.how)
		}
		r.eventuallyChanged(fmt.Sprintf("InstanceMetadata(%s) %s of a new instance", n.Name, l.how), func() (bool, string) {
			md, err := inst.InstancesV2.InstanceMetadata(r.ctx, l.node) // polled: an api.RetryError is "not yet"
			return err == nil && md != nil && providerIDOf(l.node, md) != "", fmt.Sprintf("(%v, %v)", md, err)
		})
	}
}

func ruleInstOutage(r *rt) {
	inst := r.inst()
	r.needHook("Outage", r.target().Hooks.Outage)
	// No warm-up: a provider that answers from a cache filled before the
	// outage may say (true, nil); one that must ask the cloud must not say
	// (false, nil).
	nodes := r.nodes(1)
	restore := r.target().Hooks.Outage()
	defer restore()
	for _, n := range nodes {
		for _, l := range r.lookups(n) {
			// One answer, not retried: an api.RetryError is an error, as asked.
			if ok, err := inst.InstancesV2.InstanceExists(r.ctx, l.node); !ok && err == nil {
				r.Errorf("InstanceExists(%s) %s during a cloud outage = (false, nil): the node lifecycle controller deletes the Node at once: expected an error", n.Name, l.how)
			}
		}
	}
}

func ruleInstConcurrent(r *rt) {
	inst := r.inst()
	nodes := r.nodes(1)
	want := map[string]*cloudprovider.InstanceMetadata{}
	for _, n := range nodes {
		want[n.Name] = r.mustMetadata(inst, n)
	}
	var waits []func()
	for range 4 {
		for _, n := range nodes {
			// Its own copy: a provider that modifies it fails
			// ARGS-NOT-MUTATED instead of racing the other goroutines.
			n := n.DeepCopy()
			waits = append(waits, r.Go(func() {
				if ok, err := inst.InstanceExists(r.ctx, n); err != nil || !ok {
					r.Errorf("concurrent InstanceExists(%s) = (%v, %v), expected (true, nil)", n.Name, ok, err)
				}
				if down, err := inst.InstanceShutdown(r.ctx, n); err != nil || down {
					r.Errorf("concurrent InstanceShutdown(%s) = (%v, %v), expected (false, nil)", n.Name, down, err)
				}
				md, err := inst.InstanceMetadata(r.ctx, n)
				if err != nil || md == nil {
					r.Errorf("concurrent InstanceMetadata(%s) = (%v, %v)", n.Name, md, err)
					return
				}
				if d := cmp.Diff(want[n.Name], md, cmpOpts); d != "" {
					r.Errorf("concurrent InstanceMetadata(%s) differs from a sequential call (-sequential +concurrent):\n%s", n.Name, d)
				}
			}))
		}
	}
	for _, w := range waits {
		w()
	}
}

func ruleZonesLookup(r *rt) {
	zones := r.zones()
	inst, hasInst := r.anyInst()
	for _, n := range r.namedNodes(1) {
		byName, err := zones.GetZoneByNodeName(r.ctx, types.NodeName(n.Name))
		if err != nil {
			r.Errorf("GetZoneByNodeName(%s): %v", n.Name, err)
			continue
		}
		for _, p := range append(labelValueProblems("FailureDomain", byName.FailureDomain), labelValueProblems("Region", byName.Region)...) {
			r.Errorf("GetZoneByNodeName(%s): %s", n.Name, p)
		}
		// Zones is never compared with InstanceMetadata: upstream calls
		// Zones only without InstancesV2 (cloud.go Interface.Zones).
		pid := n.Spec.ProviderID
		if pid == "" && hasInst {
			if m, err := inst.InstanceMetadata(r.ctx, n); err == nil && m != nil {
				pid = m.ProviderID
			}
		}
		if pid != "" {
			byID, err := zones.GetZoneByProviderID(r.ctx, pid)
			if err != nil {
				r.Errorf("GetZoneByProviderID(%q): %v", pid, err)
			} else if byID != byName {
				r.Errorf("GetZoneByProviderID(%q) = %+v, but GetZoneByNodeName(%s) = %+v, expected the same zone", pid, byID, n.Name, byName)
			}
		}
	}
}
