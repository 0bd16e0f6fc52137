package conformance_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// TestConfigErrors checks that Check rejects an invalid Config with an
// error, not a *Failure, naming the field, the value and what was expected.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		change       func(*conformance.Config)
		want         []string // substrings of the error
	}{
		{name: "no-target", reason: "NewTarget is required",
			change: func(c *conformance.Config) { c.NewTarget = nil },
			want:   []string{"Config.NewTarget is nil", "expected"}},
		{name: "negative-timeout", reason: "a negative Timeout has no meaning",
			change: func(c *conformance.Config) { c.Timeout = -time.Second },
			want:   []string{"Config.Timeout", "-1s", "expected"}},
		{name: "mixed-without-udp", reason: "mixed protocols include UDP: claiming them without UDP contradicts itself",
			change: func(c *conformance.Config) { c.Claims.MixedProtocols, c.Claims.UDP = true, false },
			want:   []string{"Config.Claims.MixedProtocols", "Claims.UDP", "expected"}},
		{name: "negative-staleness", reason: "a negative MaxStaleness has no meaning",
			change: func(c *conformance.Config) { c.MaxStaleness = -time.Minute },
			want:   []string{"Config.MaxStaleness", "-1m0s", "expected"}},
		{name: "claim-split-unannounced", reason: "a Config written before SourceRangesAnnotation was split off SourceRanges is told, not failed on LB-SOURCE-RANGES",
			change: func(c *conformance.Config) { c.Claims.SourceRanges, c.Claims.SourceRangesAnnotation = true, false },
			want:   []string{"Config.Claims.SourceRanges is claimed", "SourceRangesAnnotation", "Config.Unclaimed", "expected"}},
		{name: "unclaimed-unknown", reason: "Unclaimed names claims split off another",
			change: func(c *conformance.Config) { c.Unclaimed = map[string]string{"UDP": "no"} },
			want:   []string{"Config.Unclaimed", `"UDP"`, "expected one of", "SourceRangesAnnotation"}},
		{name: "unclaimed-but-claimed", reason: "acknowledging a claim as not offered contradicts claiming it",
			change: func(c *conformance.Config) {
				c.Claims.SourceRangesAnnotation = true
				c.Unclaimed = map[string]string{"SourceRangesAnnotation": "no"}
			},
			want: []string{"Config.Unclaimed", `"SourceRangesAnnotation"`, "is claimed", "expected"}},
		{name: "skip-unknown-rule", reason: "a Skip key must name a rule",
			change: func(c *conformance.Config) { c.Skip = map[string]string{"LB-NO-SUCH": "x"} },
			want:   []string{"Config.Skip", `"LB-NO-SUCH"`, "does not exist"}},
		{name: "skip-unknown-case", reason: "a RULE/case key must name a case of the rule",
			change: func(c *conformance.Config) { c.Skip = map[string]string{"LB-UNSUPPORTED-REJECTED/tcp": "x"} },
			want:   []string{"Config.Skip", `"tcp"`, "LB-UNSUPPORTED-REJECTED", "expected one of", `"udp"`}},
		{name: "skip-case-of-caseless-rule", reason: "a rule without cases has no RULE/case key",
			change: func(c *conformance.Config) { c.Skip = map[string]string{"LB-DELETE/any": "x"} },
			want:   []string{"Config.Skip", `"any"`, "LB-DELETE", "expected one of"}},
		{name: "negative-busy", reason: "a negative BusyAfterWrite has no meaning",
			change: func(c *conformance.Config) { c.BusyAfterWrite = -time.Second },
			want:   []string{"Config.BusyAfterWrite", "-1s", "expected"}},
		{name: "empty-app-protocol", reason: "an application protocol is a name",
			change: func(c *conformance.Config) { c.Claims.AppProtocols = []string{"http", ""} },
			want:   []string{"Config.Claims.AppProtocols[1]", `""`, "expected"}},
		{name: "repeated-app-protocol", reason: "an application protocol is claimed once",
			change: func(c *conformance.Config) { c.Claims.AppProtocols = []string{"http", "http"} },
			want:   []string{"Config.Claims.AppProtocols[1]", `"http"`, "expected"}},
		{name: "port-setting-no-annotation", reason: "a port setting is set by an annotation",
			change: func(c *conformance.Config) { c.PortSetting = &conformance.PortSetting{Values: [2]string{"a", "b"}} },
			want:   []string{"Config.PortSetting.Annotation", "expected"}},
		{name: "port-setting-equal-values", reason: "changing a setting needs two values",
			change: func(c *conformance.Config) {
				c.PortSetting = &conformance.PortSetting{Annotation: "lb.example.com/certificate", Values: [2]string{"a", "a"}}
			},
			want: []string{"Config.PortSetting.Values", `"a"`, "expected"}},
		{name: "port-setting-comma", reason: "a comma separates the entries of a per-port value",
			change: func(c *conformance.Config) {
				c.PortSetting = &conformance.PortSetting{Annotation: "lb.example.com/certificate", Values: [2]string{"a", "b,c"}}
			},
			want: []string{"Config.PortSetting.Values[1]", `"b,c"`, "expected"}},
		{name: "one-cluster-name", reason: "the clusterName-only isolation rules need two names",
			change: func(c *conformance.Config) { c.ClusterName, c.CrossClusterName = "kubernetes", "kubernetes" },
			want:   []string{"Config.CrossClusterName", `"kubernetes"`, "expected"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fakeConfig()
			tc.change(&cfg)
			err := conformance.Check(t.Context(), cfg)
			var f *conformance.Failure
			if err == nil || errors.As(err, &f) {
				t.Fatalf("%s: Check = %v, expected a configuration error", tc.reason, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q does not contain %q", tc.reason, err, w)
				}
			}
			// Validate gives the same verdict without running anything.
			if verr := cfg.Validate(); verr == nil || !strings.Contains(err.Error(), verr.Error()) {
				t.Errorf("%s: Validate = %v, want the error Check gave (%v)", tc.reason, verr, err)
			}
		})
	}
	if err := fakeConfig().Validate(); err != nil {
		t.Errorf("Validate of the fake's valid Config = %v, want nil", err)
	}
}

// TestTargetErrors checks that a Target.OtherCluster that cannot be another
// cluster fails every rule that builds a target, naming the field.
func TestTargetErrors(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		other        func(tgt *conformance.Target) // sets OtherCluster
		want         string
	}{
		{name: "typed-nil", reason: "a typed nil is no provider",
			other: func(tgt *conformance.Target) { var c *fake.Cloud; tgt.OtherCluster = c },
			want:  "Target.OtherCluster typed nil *fake.Cloud, expected nil or a second provider"},
		{name: "same-as-cloud", reason: "Cloud itself is not another cluster",
			other: func(tgt *conformance.Target) { tgt.OtherCluster = tgt.Cloud },
			want:  "Target.OtherCluster equal to Target.Cloud"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fakeConfig()
			cfg.NewTarget = func(ctx context.Context) (*conformance.Target, error) {
				tgt, err := fakeCloudTarget(fake.Config{ClusterID: "conformance"}, fake.Options{})
				if err == nil {
					tc.other(tgt)
				}
				return tgt, err
			}
			cfg.Skip = skipAllBut("one rule is enough", "PROVIDER-NAME")
			err := conformance.Check(t.Context(), cfg)
			var f *conformance.Failure
			if !errors.As(err, &f) || f.Rule != "PROVIDER-NAME" || !strings.Contains(f.Message, tc.want) {
				t.Errorf("%s: Check = %v, expected PROVIDER-NAME to fail with %q", tc.reason, err, tc.want)
			}
		})
	}
}

// skipAllBut returns a Config.Skip that skips every rule but those of keep,
// for reason.
func skipAllBut(reason string, keep ...string) map[string]string {
	skip := map[string]string{}
	for _, r := range conformance.Rules() {
		if !slices.Contains(keep, r.ID) {
			skip[r.ID] = reason
		}
	}
	return skip
}

// TestClaimSplitAcknowledged checks that a provider that claims
// SourceRanges and deliberately not SourceRangesAnnotation says so in
// Config.Unclaimed, and is then valid.
func TestClaimSplitAcknowledged(t *testing.T) {
	cfg := fakeConfig()
	cfg.Claims.SourceRanges, cfg.Claims.SourceRangesAnnotation = true, false
	cfg.Unclaimed = map[string]string{"SourceRangesAnnotation": "the cloud's firewall takes spec.loadBalancerSourceRanges only"}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate with the split acknowledged: %v", err)
	}
}
