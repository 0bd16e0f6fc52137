package conformance_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// brokenClauses returns the clauses of every rule's statement, each quoted
// from it: the claims a provider can break one at a time. Each area's file
// declares those of its rules next to its broken providers.
func brokenClauses(t *testing.T) map[string][]string {
	t.Helper()
	all := map[string][]string{}
	for _, area := range []map[string][]string{clausesProvider(), clausesLB(), clausesLBShared(), clausesLBFeatures(), clausesLBSteps(), clausesInstances(), clausesRoutes()} {
		for id, cls := range area {
			if _, dup := all[id]; dup {
				t.Errorf("the clauses of %s are declared twice", id)
			}
			all[id] = cls
		}
	}
	return all
}

// TestBrokenCoverage checks that every clause of every rule's statement
// has a broken provider that breaks it: each rule declares its clauses,
// each quoted from its statement, and each broken provider names the
// clause it breaks. TestBrokenProviders checks that the rule catches it.
func TestBrokenCoverage(t *testing.T) {
	statements := map[string]string{}
	for _, r := range conformance.Rules() {
		statements[r.ID] = r.Statement
	}
	clauses := brokenClauses(t)
	for _, id := range slices.Sorted(maps.Keys(clauses)) {
		if _, ok := statements[id]; !ok {
			t.Errorf("clauses are declared for %s, which is no rule", id)
		}
		for i, cl := range clauses[id] {
			if cl == "" || !strings.Contains(statements[id], cl) {
				t.Errorf("clause %q of %s is not quoted from its statement %q", cl, id, statements[id])
			}
			if slices.Contains(clauses[id][:i], cl) {
				t.Errorf("clause %q of %s is declared twice", cl, id)
			}
		}
	}
	covered := map[string]map[string][]string{}
	names := map[string]bool{}
	for _, c := range brokenCases() {
		if names[c.name] {
			t.Errorf("broken provider %q is declared twice", c.name)
		}
		names[c.name] = true
		if c.want == "" {
			continue
		}
		if !slices.Contains(clauses[c.want], c.clause) {
			t.Errorf("broken provider %q breaks clause %q, which is not one of %s's declared clauses %q", c.name, c.clause, c.want, clauses[c.want])
			continue
		}
		if covered[c.want] == nil {
			covered[c.want] = map[string][]string{}
		}
		covered[c.want][c.clause] = append(covered[c.want][c.clause], c.name)
	}
	for _, r := range conformance.Rules() {
		cls, ok := clauses[r.ID]
		if !ok || len(cls) == 0 {
			t.Errorf("%s declares no clauses: quote each claim of its statement %q", r.ID, r.Statement)
			continue
		}
		for _, cl := range cls {
			if by := covered[r.ID][cl]; len(by) > 0 {
				t.Logf("%s: %q broken by %s", r.ID, cl, strings.Join(by, ", "))
			} else {
				t.Errorf("%s: no broken provider breaks the clause %q", r.ID, cl)
			}
		}
	}
}
