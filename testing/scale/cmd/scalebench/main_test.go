package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/testing/scale"
)

func TestParseSizes(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   string
		reason string
	}{
		{name: "two sizes", in: "10x5, 100x50", want: "[{10 5} {100 50}] <nil>", reason: "comma-separated, spaces allowed"},
		{name: "no x", in: "100", want: `[] -sizes "100": expected <nodes>x<services> such as 100x50`, reason: "both counts are needed"},
		{name: "zero nodes", in: "0x5", want: `[] -sizes "0x5": expected <nodes>x<services> such as 100x50`, reason: "a cluster needs a Node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSizes(tc.in)
			if got == nil {
				got = []size{}
			}
			if diff := cmp.Diff(tc.want, fmt.Sprint(got, " ", err)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestOutput checks the table and the chart of two hand-made reports.
func TestOutput(t *testing.T) {
	rep := func(nodes int, ensure int64) *scale.Report {
		return &scale.Report{Nodes: nodes, Services: nodes / 2, Scenarios: []scale.ScenarioReport{{
			Name: scale.BringUp, Converged: time.Second,
			Calls:   []scale.OpCount{{Capability: "loadbalancer", Operation: "EnsureLoadBalancer", Write: true, Calls: ensure, Throttled: 1}},
			Minimum: []scale.Minimum{{Capability: "loadbalancer", Operation: "EnsureLoadBalancer", Calls: int64(nodes / 2), Why: "one per new Service"}},
		}}}
	}
	results := []result{{"ccmkit fake", rep(10, 7), nil}, {"ccmkit fake", rep(100, 60), nil}}
	var b strings.Builder
	writeMarkdown(&b, results)
	for _, want := range []string{
		"| bring-up | EnsureLoadBalancer | 5 (one per new Service) | 7, 1 throttled |",
		"| bring-up | EnsureLoadBalancer | 50 (one per new Service) | 60, 1 throttled |",
		"| bring-up | *time to converge* | | 1s |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	svg := chart(results)
	if got := strings.Count(svg, "<polyline"); got != 1 {
		t.Errorf("chart has %d lines, want 1 (bring-up of one provider):\n%s", got, svg)
	}
}

// TestDriverTablePerProvider checks that each provider reporting
// Driver-boundary calls gets a table of its own, after the cloud costs of
// its minimums, and that the chart draws each provider in its own line
// style.
func TestDriverTablePerProvider(t *testing.T) {
	rep := func(nodes int, applies int64) *scale.Report {
		return &scale.Report{Nodes: nodes, Services: nodes / 2, Scenarios: []scale.ScenarioReport{{
			Name:   scale.BringUp,
			Calls:  []scale.OpCount{{Capability: "loadbalancer", Operation: "UpdateLoadBalancer", Write: true, Calls: 1}},
			Driver: []scale.OpCount{{Operation: "ApplyLoadBalancer", Write: true, Calls: applies}},
		}}}
	}
	perService := rep(10, 70)
	perService.CloudCosts = scale.CloudCosts{BackendPools: scale.BackendPoolsPerService}
	results := []result{{"ccmkit fake", perService, nil}, {"ccmkit fake, shared pools", rep(10, 7), nil}, {"upstream fake", &scale.Report{Nodes: 10, Services: 5}, nil}}
	var b strings.Builder
	writeMarkdown(&b, results)
	for _, want := range []string{
		"#### ccmkit fake: calls at the Driver boundary",
		"#### ccmkit fake, shared pools: calls at the Driver boundary",
		"| bring-up | ApplyLoadBalancer | 70 |",
		"| bring-up | ApplyLoadBalancer | 7 |",
		"Cloud minimum from the costs (scale.Target.CloudCosts): a load balancer of P ports created in 1 write, deleted in 1 write; a backend pool per load balancer, 1 write to each per Node change.",
		"Cloud minimum from the costs (scale.Target.CloudCosts): a load balancer of P ports created in 1 write, deleted in 1 write; one backend pool shared by every load balancer, 1 write to each per Node change.",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "#### upstream fake: calls at the Driver boundary") {
		t.Errorf("a Driver table for the upstream fake, which reports no Driver calls:\n%s", b.String())
	}
	svg := chart(results)
	for _, style := range []string{`stroke-dasharray="6 4"`, `stroke-dasharray="2 3"`} {
		if !strings.Contains(svg, style) {
			t.Errorf("chart lacks the line style %s of a provider:\n%s", style, svg)
		}
	}
}
