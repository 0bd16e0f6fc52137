// Package readme checks the figures ccmkit's README states against what a
// test measured, so that a number in the README is never a hand count
// (CONTRIBUTING.md, rule L4). It is test support: only tests import it.
package readme

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// Section returns the section of the Markdown file at path that starts
// with the level-2 heading "## "+heading, up to the next level-2 heading,
// with its white space collapsed to single spaces (figures may wrap lines).
// It fails t when the file or the heading is missing.
func Section(t testing.TB, path, heading string) string {
	t.Helper()
	raw, err := os.ReadFile(path) //nolint:gosec // G304: a test helper reading the README its test names
	if err != nil {
		t.Fatalf("reading the README: %v", err)
	}
	_, section, ok := strings.Cut(string(raw), "## "+heading+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", path, heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return strings.Join(strings.Fields(section), " ")
}

// CheckPasses checks the figure "- **who**: passes every rule … (N run;"
// of the section text (see Section) against outs, the outcomes of a whole
// run of the conformance suite: N must be the number of rules that passed.
// A run narrowed by -run (fewer outcomes than rules) is not checked.
func CheckPasses(t testing.TB, text, who string, outs []conformance.Outcome) {
	t.Helper()
	if len(outs) != len(conformance.Rules()) {
		return
	}
	pattern := `\*\*` + regexp.QuoteMeta(who) + `\*\*: passes every rule[^(]*\((\d+) run;`
	m := regexp.MustCompile(pattern).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the README states no figure for %s (%s)", who, pattern)
	}
	passed := 0
	var skipped []string
	for _, o := range outs {
		switch o.Status {
		case conformance.Passed:
			passed++
		case conformance.Skipped:
			skipped = append(skipped, o.Rule+" ("+o.SkipReason+")")
		}
	}
	if n, _ := strconv.Atoi(m[1]); n != passed {
		// The rules skipped say which one did not pass this time: a
		// precondition that failed under load shows as a skip.
		t.Errorf("the README says %s passes %d rules, the suite passed %d of %d; skipped: %s", who, n, passed, len(outs), strings.Join(skipped, "; "))
	}
}
