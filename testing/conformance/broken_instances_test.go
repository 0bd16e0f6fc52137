package conformance_test

import (
	"context"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// brokenInstances returns the broken providers of the InstancesV2 and Zones
// rules: INST-* and ZONES-LOOKUP.
func brokenInstances() []brokenCase {
	type bc = brokenCase
	return []bc{
		{
			name: "exists-false-on-error", want: "INST-OUTAGE",
			reason: "any cloud error from the look-up is taken for \"instance gone\"",
			b: wrapped{inst: func(b wrappedInst) cloudprovider.InstancesV2 {
				b.exists = func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
					ok, err := next.InstanceExists(ctx, n)
					if err != nil && ctx.Err() == nil {
						return false, nil
					}
					return ok, err
				}
				return b
			}},
		},
		{
			name: "addresses-reordered-by-name", want: "INST-ADDRESSES-STABLE",
			reason: "a look-up by name returns the addresses in another order than a look-up by provider ID",
			b: rewriteMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) {
				if n.Spec.ProviderID == "" {
					md.NodeAddresses = slices.Clone(md.NodeAddresses)
					slices.Reverse(md.NodeAddresses)
				}
			}),
		},
		{
			name: "provider-id-rerendered", want: "INST-METADATA",
			reason: "metadata spells the provider ID differently from the node's spec.providerID",
			b: rewriteMetadata(func(_ *v1.Node, md *cloudprovider.InstanceMetadata) {
				md.ProviderID = strings.Replace(md.ProviderID, "fake://", "fake:///", 1)
			}),
		},
		{
			name: "kubernetes-io-labels", want: "INST-LABELS",
			reason: "an additional label under node.kubernetes.io, which the node controller discards",
			b: rewriteMetadata(func(_ *v1.Node, md *cloudprovider.InstanceMetadata) {
				labels := map[string]string{"node.kubernetes.io/pool": "general"}
				for k, v := range md.AdditionalLabels {
					labels[k] = v
				}
				md.AdditionalLabels = labels
			}),
		},
		{
			name: "new-instance-gone-from-stale-list", want: "INST-NEW-INSTANCE",
			reason: "an instance missing from the provider's cached list is taken for gone without asking the cloud, so a new Node is deleted before the cache learns of it",
			target: staleListTarget,
		},
		{
			name: "instances-by-name-only", want: "INST-EXISTS",
			also:   []string{"INST-METADATA", "INST-TERMINATED", "INST-SHUTDOWN", "CTRL-NODE-TERMINATED", "CTRL-NODE-SHUTDOWN"},
			reason: "InstancesV2 ignores spec.providerID and looks instances up by Node name: a Node named unlike its instance (Target.RenamedNodes) is reported gone",
			b: wrapped{inst: func(b wrappedInst) cloudprovider.InstancesV2 {
				b.exists = func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
					return next.InstanceExists(ctx, byNameOnly(n))
				}
				b.shutdown = func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
					return next.InstanceShutdown(ctx, byNameOnly(n))
				}
				b.metadata = func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
					return next.InstanceMetadata(ctx, byNameOnly(n))
				}
				return b
			}},
		},
	}
}

// clausesInstances returns the clauses of the statements of the rules of this
// file, each quoted from its statement (see TestBrokenCoverage).
func clausesInstances() map[string][]string {
	return map[string][]string{}
}
