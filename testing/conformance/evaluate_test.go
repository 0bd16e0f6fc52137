package conformance_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// TestEvaluate checks Evaluate's outcomes: one per rule, in the order of
// Rules, with the status, the messages or the skip reason, and the
// recommendation flag; Skip by "RULE/case" and UpstreamOnly. The fake builds
// UDP load balancers, so with UDP unclaimed LB-UNSUPPORTED-REJECTED fails
// its udp case.
func TestEvaluate(t *testing.T) {
	type got struct {
		Status         conformance.Status
		Recommendation bool
		Detail         string // the first message or the skip reason, cut to want's length
	}
	for _, tc := range []struct {
		name, reason string
		upstreamOnly bool
		skip         map[string]string
		want         map[string]got
	}{
		{name: "all", reason: "every rule runs; the udp case fails",
			want: map[string]got{
				"PROVIDER-NAME":           {conformance.Passed, false, ""},
				"LB-CONVERGED":            {conformance.Passed, true, ""},
				"LB-UNSUPPORTED-REJECTED": {conformance.Failed, false, "EnsureLoadBalancer(conformance/feature-udp) needs UDP"},
			}},
		{name: "skip-case", reason: "skipping the udp and mixed-protocols cases leaves no unclaimed feature to check",
			skip: map[string]string{"LB-UNSUPPORTED-REJECTED/udp": "known", "LB-UNSUPPORTED-REJECTED/mixed-protocols": "known"},
			want: map[string]got{
				"PROVIDER-NAME":           {conformance.Passed, false, ""},
				"LB-CONVERGED":            {conformance.Passed, true, ""},
				"LB-UNSUPPORTED-REJECTED": {conformance.Skipped, false, "every feature is claimed (or skipped)"},
			}},
		{name: "upstream-only", reason: "UpstreamOnly skips the recommendations, and only them",
			upstreamOnly: true,
			want: map[string]got{
				"PROVIDER-NAME":           {conformance.Passed, false, ""},
				"LB-CONVERGED":            {conformance.Skipped, true, "a ccmkit recommendation, not an upstream contract: skipped by Config.UpstreamOnly"},
				"LB-UNSUPPORTED-REJECTED": {conformance.Failed, false, "EnsureLoadBalancer(conformance/feature-udp) needs UDP"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fakeConfig()
			cfg.Claims.UDP, cfg.Claims.MixedProtocols = false, false // mixed protocols need UDP
			cfg.UpstreamOnly = tc.upstreamOnly
			cfg.Skip = skipAllBut("not under test", slices.Collect(maps.Keys(tc.want))...)
			maps.Copy(cfg.Skip, tc.skip)
			outs, err := conformance.Evaluate(t.Context(), cfg)
			if err != nil {
				t.Fatalf("%s: Evaluate: %v", tc.reason, err)
			}
			var ids []string
			gotm := map[string]got{}
			for _, o := range outs {
				ids = append(ids, o.Rule)
				w, ok := tc.want[o.Rule]
				if !ok {
					if o.Status != conformance.Skipped || o.SkipReason != "skipped by Config.Skip: not under test" {
						t.Errorf("%s: rule %s: outcome %+v, expected skipped by Config.Skip", tc.reason, o.Rule, o)
					}
					continue
				}
				detail := o.SkipReason
				if len(o.Messages) > 0 {
					detail = o.Messages[0]
				}
				if !strings.HasPrefix(detail, w.Detail) {
					t.Errorf("%s: rule %s: detail %q, expected it to begin with %q", tc.reason, o.Rule, detail, w.Detail)
				}
				gotm[o.Rule] = got{o.Status, o.Recommendation, w.Detail}
			}
			var wantIDs []string
			for _, r := range conformance.Rules() {
				wantIDs = append(wantIDs, r.ID)
			}
			if d := cmp.Diff(wantIDs, ids); d != "" {
				t.Errorf("%s: outcomes are not one per rule in the order of Rules (-want +got):\n%s", tc.reason, d)
			}
			if d := cmp.Diff(tc.want, gotm); d != "" {
				t.Errorf("%s: outcomes differ (-want +got):\n%s", tc.reason, d)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	outs := []conformance.Outcome{
		{Rule: "LB-A", Status: conformance.Passed},
		{Rule: "LB-B", Status: conformance.Failed, Messages: []string{"first line\nsecond line", "another"}},
		{Rule: "LB-C", Status: conformance.Failed, Recommendation: true, Messages: []string{"rec"}},
		{Rule: "LB-D", Status: conformance.Skipped, SkipReason: "why"},
	}
	want := "conformance: 4 rules: 1 passed, 2 failed, 1 skipped\n  LB-B: first line\n  LB-C: [recommendation] rec"
	if got := conformance.Summary(outs); got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
}
