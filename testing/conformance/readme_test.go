package conformance_test

import (
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/internal/readme"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// TestREADMEFigures checks the figures the README's section on the suite
// states against what the tests pin: the numbers of rules, upstream
// contracts and recommendations, upstream fake failures and broken
// providers.
func TestREADMEFigures(t *testing.T) {
	text := readmeSuiteSection(t)
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

// suiteSection is the heading of the README's section on the suite.
const suiteSection = "Run the conformance tests against your provider"

// readmeSuiteSection returns the README's section on the suite with its
// white space collapsed.
func readmeSuiteSection(t *testing.T) string {
	t.Helper()
	return readme.Section(t, "../../README.md", suiteSection)
}

// checkREADMERun checks the README's "- **who**: passes every rule (N run;"
// against the outcomes of a whole run of the suite.
func checkREADMERun(t *testing.T, who string, outs []conformance.Outcome) {
	t.Helper()
	readme.CheckPasses(t, readmeSuiteSection(t), who, outs)
}
