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

// readmeSuiteSection returns the README's section on the suite with its
// white space collapsed, as figures may wrap lines.
func readmeSuiteSection(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatalf("reading the README: %v", err)
	}
	_, section, ok := strings.Cut(string(raw), "## Run the conformance tests against your provider")
	if !ok {
		t.Fatalf("the README has no section \"Run the conformance tests against your provider\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return strings.Join(strings.Fields(section), " ")
}

// checkREADMERun checks the README's "- **who**: passes every rule (N run;"
// against the outcomes of a whole run of the suite: N rules passed and none
// failed. A run narrowed by -run is not checked.
func checkREADMERun(t *testing.T, who string, outs []conformance.Outcome) {
	t.Helper()
	if len(outs) != len(conformance.Rules()) {
		return
	}
	pattern := `\*\*` + regexp.QuoteMeta(who) + `\*\*: passes every rule[^(]*\((\d+) run;`
	m := regexp.MustCompile(pattern).FindStringSubmatch(readmeSuiteSection(t))
	if m == nil {
		t.Fatalf("the README's section on the suite states no figure for %s (%s)", who, pattern)
	}
	passed := 0
	for _, o := range outs {
		if o.Status == conformance.Passed {
			passed++
		}
	}
	if n, _ := strconv.Atoi(m[1]); n != passed {
		t.Errorf("the README says %s passes %d rules, the suite passed %d of %d", who, n, passed, len(outs))
	}
}
