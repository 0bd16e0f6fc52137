package conformance_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	upstreamfake "k8s.io/cloud-provider/fake"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// upstreamTarget configures k8s.io/cloud-provider/fake as a test would to
// pass for a working provider: instances with provider IDs, addresses, a
// zone, an external IP for load balancers, an empty route map.
func upstreamTarget(context.Context) (*conformance.Target, error) {
	nodes := []*v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "uid-a"}, Spec: v1.NodeSpec{ProviderID: "fake://i-1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "node-b", UID: "uid-b"}, Spec: v1.NodeSpec{ProviderID: "fake://i-2"}},
	}
	cloud := &upstreamfake.Cloud{
		EnableInstancesV2:  true,
		ExistsByProviderID: true,
		Addresses:          []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.11"}},
		ProviderID:         map[types.NodeName]string{"node-a": "fake://i-1", "node-b": "fake://i-2"},
		InstanceTypes:      map[types.NodeName]string{"fake://i-1": "small", "fake://i-2": "small"},
		Zone:               cloudprovider.Zone{FailureDomain: "zone-a", Region: "region-1"},
		ExternalIP:         net.ParseIP("203.0.113.10"),
		RouteMap:           map[string]*upstreamfake.Route{},
	}
	return &conformance.Target{Cloud: cloud, Nodes: nodes}, nil
}

func upstreamConfig() conformance.Config {
	return conformance.Config{
		NewTarget: upstreamTarget,
		Claims:    conformance.Claims{LoadBalancer: true, InstancesV2: true, Routes: true, Zones: true},
		Skip: map[string]string{
			// Not run: EnsureLoadBalancer writes the Balancers map without a
			// lock, a data race that -race reports and that can crash the
			// test binary ("concurrent map writes").
			"LB-CONCURRENT": "k8s.io/cloud-provider/fake is not safe for concurrent EnsureLoadBalancer calls",
		},
	}
}

// upstreamFailures is what the suite reports for k8s.io/cloud-provider/fake
// v0.37.2, a call recorder without state: the README quotes it.
var upstreamFailures = []string{
	"CTRL-SERVICE-LB",            // GetLoadBalancer reports the constant Exists, not the Ensured LB
	"CTX-CANCELLED",              // the same: exists=false for an existing LB
	"INST-EXISTS",                // a never-existing instance exists (ExistsByProviderID is global)
	"INST-METADATA",              // by-name look-up loses the instance type; metadata invented for missing instances
	"LB-CLUSTER-ISOLATION",       // Balancers keyed by Service UID only; GetLoadBalancer ignores the cluster
	"LB-DELETE-STALE",            // exists is a constant: the service controller would never delete the load balancer
	"LB-DUAL-STACK-REJECTED",     // (recommendation) RequireDualStack "succeeds" with one IP
	"LB-GET-EXISTS",              // exists is a constant
	"LB-RECREATE",                // exists is a constant
	"LB-SOURCE-RANGES",           // a valid restricting annotation is accepted, SourceRanges unclaimed, and ignored
	"LB-SOURCE-RANGES-MALFORMED", // (recommendation) a malformed source-ranges annotation is accepted
	"LB-UNSUPPORTED-REJECTED",    // UDP, SCTP, mixed, node-port-less, spec source ranges all "succeed" with one IP
}

// TestUpstreamFake pins which rules k8s.io/cloud-provider/fake fails.
func TestUpstreamFake(t *testing.T) {
	err := conformance.Check(t.Context(), upstreamConfig())
	got := failedRules(t, err)
	if d := cmp.Diff(upstreamFailures, got); d != "" {
		t.Errorf("rules failed by k8s.io/cloud-provider/fake changed (-pinned +now):\n%s\nfailures:\n%v", d, err)
	}
	t.Logf("k8s.io/cloud-provider/fake fails %d rules:\n%v", len(got), err)
}

// failedRules returns the sorted, distinct IDs of the rules err reports.
func failedRules(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return []string{}
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	ids := []string{}
	for _, e := range errs {
		var f *conformance.Failure
		if !errors.As(e, &f) {
			t.Fatalf("Check returned an error that is not a *conformance.Failure: %v", e)
		}
		ids = append(ids, f.Rule)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}
