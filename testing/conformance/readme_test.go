package conformance_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// TestREADMEFigures checks the figures the README's section on the suite
// states against what the tests pin: the numbers of rules, upstream
// contracts and recommendations, upstream fake failures and broken
// providers.
func TestREADMEFigures(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatalf("reading the README: %v", err)
	}
	_, section, ok := strings.Cut(string(raw), "## Run the conformance tests against your provider")
	if !ok {
		t.Fatalf("the README has no section \"Run the conformance tests against your provider\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	text := strings.Join(strings.Fields(section), " ") // figures may wrap lines
	figure := func(what, pattern string) []int {
		m := regexp.MustCompile(pattern).FindStringSubmatch(text)
		if m == nil {
			t.Errorf("the README's section states no %s (%s)", what, pattern)
			return nil
		}
		var out []int
		for _, s := range m[1:] {
			n, _ := strconv.Atoi(s)
			out = append(out, n)
		}
		return out
	}
	rules := conformance.Rules()
	recs := 0
	for _, r := range rules {
		if r.Recommendation {
			recs++
		}
	}
	upstreamRecs := 0
	for _, id := range upstreamFailures {
		if slices.ContainsFunc(rules, func(r conformance.Rule) bool { return r.ID == id && r.Recommendation }) {
			upstreamRecs++
		}
	}
	broken := 0
	for _, c := range brokenCases() {
		if c.want != "" {
			broken++
		}
	}
	for _, tc := range []struct {
		what, pattern string
		want          []int
	}{
		{"rule counts", `checks (\d+) rules \((\d+) upstream contracts, and (\d+) ccmkit recommendations`, []int{len(rules), len(rules) - recs, recs}},
		{"upstream fake failures", `k8s.io/cloud-provider/fake\W* fails (\d+) rules, (\d+) of them recommendations`, []int{len(upstreamFailures), upstreamRecs}},
		{"broken providers", `(\d+) deliberately broken providers`, []int{broken}},
	} {
		if got := figure(tc.what, tc.pattern); got != nil {
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("the README's %s differ from the tests (-want +got):\n%s", tc.what, d)
			}
		}
	}
}
