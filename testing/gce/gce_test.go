package gce

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"

	compute "google.golang.org/api/compute/v1"
	"k8s.io/klog/v2"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// gceConfig is the suite's Config for GCE's provider. Each claim is what
// GCE's external (target-pool) load balancer, instances and routes build
// as asked, decided from its code:
//
//   - LoadBalancer, InstancesV2, Routes, Zones: gce.go returns (g, true)
//     from every accessor.
//   - UDP: gce_loadbalancer_external.go loadBalancerPortRange takes TCP and
//     UDP, createForwardingRule and firewallObject use the port's protocol.
//     Not SCTP (loadBalancerPortRange rejects it), not mixed protocols
//     (gce_loadbalancer.go checkMixedProtocol rejects them), not dual
//     stack (the external path reserves one IPv4 address).
//   - NodePortless, PassThrough: a target pool passes packets through to
//     the nodes on the Service port, addressed to the forwarding rule's
//     IP; ensureExternalLoadBalancer never reads a node port.
//   - SourceRanges, SourceRangesAnnotation: ensureExternalLoadBalancer
//     takes servicehelpers.GetLoadBalancerSourceRanges (the spec field,
//     else the annotation) as the node firewall's source ranges.
//   - Not SharedBackendPools: one target pool per Service.
//
// ProviderName "gce": the registered factory (gce.go newGCECloud) builds a
// real Cloud from a cloud-config naming the project, zone and network,
// once it gets an OAuth token from the metadata server (gce.go
// newOauthClient polls for one), which metadataServer serves on loopback
// (GCE_METADATA_HOST). BadCloudConfig is a zone with no region
// (gce_util.go GetGCERegion rejects it).
func gceConfig() conformance.Config {
	return conformance.Config{
		NewTarget: newTarget,
		Claims: conformance.Claims{
			LoadBalancer: true, InstancesV2: true, Routes: true, Zones: true,
			UDP: true, NodePortless: true, PassThrough: true, SourceRanges: true, SourceRangesAnnotation: true,
		},
		ProviderName:   "gce",
		CloudConfig:    "[global]\nproject-id = test-project\nlocal-zone = us-central1-b\nnetwork-name = default\n",
		BadCloudConfig: "[global]\nproject-id = test-project\nlocal-zone = uscentral1b\nnetwork-name = default\n",
	}
}

// pinned is each rule's outcome on GCE's provider v0.28.2 with this
// package's fake; README.md explains every fail and skip. A change fails
// TestGCE naming the rule: update both when the suite or the provider
// changes.
var pinned = map[string]conformance.Status{
	"PROVIDER-ACCESSORS":         conformance.Passed,
	"PROVIDER-NAME":              conformance.Passed,
	"PROVIDER-CLUSTER-ID":        conformance.Passed,
	"PROVIDER-REGISTRATION":      conformance.Passed,
	"PROVIDER-BAD-CONFIG":        conformance.Passed,
	"LB-ENSURE-STATUS":           conformance.Passed,
	"LB-NO-NODES":                conformance.Failed, // recommendation: GCE refuses an Ensure with no nodes (errStrLbNoHosts)
	"LB-INGRESS-VALID":           conformance.Passed,
	"LB-GET-EXISTS":              conformance.Passed,
	"LB-IDEMPOTENT":              conformance.Passed,
	"LB-CONVERGED":               conformance.Failed, // recommendation: every Ensure reserves and releases the static IP: 2 writes
	"LB-DELETE":                  conformance.Passed,
	"LB-DELETE-UNKNOWN":          conformance.Passed,
	"LB-DELETE-STALE":            conformance.Passed,
	"LB-RECREATE":                conformance.Passed,
	"LB-BACKENDS":                conformance.Passed,
	"LB-PORTS":                   conformance.Passed,
	"LB-SOURCE-RANGES":           conformance.Passed,
	"LB-SOURCE-RANGES-MALFORMED": conformance.Passed,
	"LB-HEALTH-CHECK":            conformance.Passed,
	"LB-HEALTH-CHECK-CLUSTER":    conformance.Passed,
	"LB-UNSUPPORTED-REJECTED":    conformance.Passed,
	"LB-DUAL-STACK-REJECTED":     conformance.Failed, // recommendation: RequireDualStack is served single-stack IPv4
	"LB-CLAIMED-FEATURES":        conformance.Passed,
	"LB-CLUSTER-ISOLATION":       conformance.Passed,
	"LB-CONCURRENT":              conformance.Passed,
	"LB-NODE-SYNC":               conformance.Passed,
	"LB-DELETE-SHARED":           conformance.Passed,
	"LB-SHARED-POOL-WRITES":      conformance.Skipped, // not claimed: a target pool per Service
	"LB-MULTI-STEP":              conformance.Passed,
	"LB-PER-PORT":                conformance.Skipped, // no appProtocol claimed
	"LB-PARTIAL-REPAIR":          conformance.Skipped, // no Hooks.Damage
	"LB-OUTAGE":                  conformance.Passed,
	"INST-EXISTS":                conformance.Passed,
	"INST-TERMINATED":            conformance.Passed,
	"INST-SHUTDOWN":              conformance.Failed,  // InstanceShutdown is cloudprovider.NotImplemented
	"INST-STOPPED":               conformance.Skipped, // the same cause, owned by INST-SHUTDOWN
	"INST-METADATA":              conformance.Passed,
	"INST-ADDRESSES":             conformance.Passed,
	"INST-INTERNAL-IP":           conformance.Passed,
	"INST-ADDRESSES-STABLE":      conformance.Passed,
	"INST-PROVIDED-NODE-IP":      conformance.Passed,
	"INST-LABELS":                conformance.Passed,
	"INST-NEW-INSTANCE":          conformance.Passed,
	"INST-OUTAGE":                conformance.Passed,
	"INST-CONCURRENT":            conformance.Skipped, // the same cause, owned by INST-SHUTDOWN
	"ZONES-LOOKUP":               conformance.Passed,
	"ROUTE-ROUNDTRIP":            conformance.Passed,
	"ROUTE-CIDR-VERBATIM":        conformance.Skipped, // IPv6 routes not claimed
	"ROUTE-NAMES":                conformance.Skipped, // IPv6 routes not claimed
	"ROUTE-DELETE":               conformance.Passed,
	"ROUTE-TARGET-ADDRESSES":     conformance.Passed,
	"ROUTE-BLACKHOLE":            conformance.Passed,
	"ROUTE-CLUSTER-SCOPE":        conformance.Failed, // ListRoutes filters on the name prefix "<cluster>-"
	"ROUTE-CONCURRENT":           conformance.Passed,
	"ROUTE-OUTAGE":               conformance.Passed,
	"SENTINELS-UNWRAPPED":        conformance.Passed,
	"ARGS-NOT-MUTATED":           conformance.Passed,
	"CTX-CANCELLED":              conformance.Passed,
	"CTX-CANCELLED-PROMPT":       conformance.Passed,
	"CTRL-NODE-INIT":             conformance.Passed,
	"CTRL-NODE-TERMINATED":       conformance.Passed,
	"CTRL-NODE-SHUTDOWN":         conformance.Skipped, // the same cause, owned by INST-SHUTDOWN
	"CTRL-SERVICE-LB":            conformance.Passed,
	"CTRL-SERVICE-BEFORE-NODES":  conformance.Passed, // refused until a Node joins, then provisioned
	"CTRL-SERVICE-PORT":          conformance.Passed,
	"CTRL-SERVICE-DELETE":        conformance.Passed,
	"CTRL-SERVICE-CLASS":         conformance.Passed,
	"CTRL-ROUTES":                conformance.Passed,
}

// TestGCE runs the whole suite on GCE's provider and compares each rule's
// outcome with pinned. GCE_DETAILS=1 logs every message of every failed
// rule; GCE_KLOG=1 keeps the provider's and controllers' logs.
func TestGCE(t *testing.T) {
	if os.Getenv("GCE_KLOG") == "" {
		silenceKlog(t)
	}
	t.Setenv("GCE_METADATA_HOST", metadataServer(t))

	outs, err := conformance.Evaluate(t.Context(), gceConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("outcome on k8s.io/cloud-provider-gcp/providers@v0.28.2:\n%s", table(outs))
	if os.Getenv("GCE_DETAILS") != "" {
		for _, o := range outs {
			if o.Status == conformance.Failed {
				t.Logf("%s messages:\n%s", o.Rule, strings.Join(o.Messages, "\n---\n"))
			}
		}
	}

	seen := map[string]bool{}
	for _, o := range outs {
		seen[o.Rule] = true
		want, ok := pinned[o.Rule]
		switch {
		case !ok:
			t.Errorf("%s: %s, and no outcome is pinned for it: pin it and explain it in README.md", o.Rule, o.Status)
		case o.Status != want:
			t.Errorf("%s: %s, pinned %s: %s", o.Rule, o.Status, want, firstLine(o))
		}
	}
	for id := range pinned {
		if !seen[id] {
			t.Errorf("%s: pinned, but the suite reported no outcome for it", id)
		}
	}
	if !t.Failed() {
		// Under -race, a FAIL after this line is the race detector's (GCE's
		// cluster-ID watcher: README.md), not a rule's.
		t.Log("every rule's outcome is as pinned")
	}
	stats := map[conformance.Status]int{}
	for _, o := range outs {
		stats[o.Status]++
	}
	t.Logf("%d rules: %d pass, %d fail, %d skip", len(outs), stats[conformance.Passed], stats[conformance.Failed], stats[conformance.Skipped])
}

// silenceKlog discards what GCE's provider and the upstream controllers
// log through klog (thousands of lines; GCE_KLOG=1 keeps them): errors
// too, which klog also writes to stderr up to -stderrthreshold.
func silenceKlog(t *testing.T) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for k, v := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL", "legacy_stderr_threshold_behavior": "false"} {
		if err := fs.Set(k, v); err != nil {
			t.Fatalf("klog flag %s: %v", k, err)
		}
	}
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
}

// table renders outs as rule, status and the first line of the first
// message or the skip reason.
func table(outs []conformance.Outcome) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RULE\tSTATUS\tFIRST LINE")
	for _, o := range outs {
		fmt.Fprintf(w, "%s\t%s\t%s\n", o.Rule, o.Status, firstLine(o))
	}
	w.Flush()
	return b.String()
}

func firstLine(o conformance.Outcome) string {
	s := o.SkipReason
	if len(o.Messages) > 0 {
		s = o.Messages[0]
		if len(o.Messages) > 1 {
			s = fmt.Sprintf("(%d messages) %s", len(o.Messages), s)
		}
	}
	s, _, _ = strings.Cut(s, "\n")
	const limit = 200
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return s
}

// metadataServer serves, on loopback, the one metadata path the GCE
// factory needs with a cloud-config: an OAuth token for the default
// service account (gce.go generateCloudConfig, newOauthClient). Every
// other path is 404, which the factory turns into an error (a nil reader
// makes it ask the metadata server for the project and zone). It returns
// the host:port for GCE_METADATA_HOST.
func metadataServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Metadata-Flavor", "Google")
		if strings.HasPrefix(r.URL.Path, "/computeMetadata/v1/instance/service-accounts/default/token") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"conformance","expires_in":3600,"token_type":"Bearer"}`)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	host, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(host, port)
}

// TestHookHelpers checks count.go's generic wrappers on the real mock: the
// number of hook fields each wraps, that a counted call proceeds to the
// mock, and that an outage fails reads and writes alike.
func TestHookHelpers(t *testing.T) {
	s, err := newSandbox()
	if err != nil {
		t.Fatal(err)
	}
	structs := mockStructs(s.mock)
	all := hookFields(func(string) bool { return true }, structs...)
	writes := hookFields(isMutation, structs...)
	seven := hookFields(func(m string) bool {
		return slices.ContainsFunc(mutatingPrefixes[:7], func(p string) bool { return strings.HasPrefix(m, p) })
	}, structs...)
	t.Logf("%d mock structs, %d hook fields: %d counted as writes (%d by the prefixes Insert/Delete/Update/Patch/Set/Add/Remove alone)", len(structs), all, writes, seven)

	if _, err := s.addVM("gce-node-x"); err != nil {
		t.Fatal(err)
	}
	before := s.meter.Writes()
	if err := s.g.CreateFirewall(firewallFixture("fw-a")); err != nil {
		t.Fatalf("CreateFirewall: %v", err)
	}
	if got, err := s.g.GetFirewall("fw-a"); err != nil || got.Name != "fw-a" {
		t.Fatalf("GetFirewall after a counted insert = (%v, %v), expected the firewall", got, err)
	}
	if n := s.meter.Writes() - before; n != 1 {
		t.Errorf("one insert and one get counted as %d writes, expected 1", n)
	}
	restore := s.meter.Outage()
	if _, err := s.g.GetFirewall("fw-a"); err == nil || !strings.Contains(err.Error(), "outage") {
		t.Errorf("GetFirewall during an outage: %v, expected the outage error", err)
	}
	if err := s.g.CreateFirewall(firewallFixture("fw-b")); err == nil {
		t.Error("CreateFirewall during an outage succeeded, expected the outage error")
	}
	restore()
	if n := s.meter.Writes() - before; n != 1 {
		t.Errorf("after a failed insert during an outage, %d writes, expected still 1", n)
	}
	if _, err := s.g.GetFirewall("fw-b"); err == nil {
		t.Error("the firewall inserted during an outage exists")
	}
}

func firewallFixture(name string) *compute.Firewall {
	return &compute.Firewall{Name: name, Allowed: []*compute.FirewallAllowed{{IPProtocol: "tcp", Ports: []string{"80"}}}, SourceRanges: []string{"0.0.0.0/0"}}
}
