package admission_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/annotation"
)

// TestClaimedPrefixAgree: under a prefix the declarations claim, a
// misspelt or wrongly cased key is refused by the policy exactly when the
// Reconciler refuses it, with its message, but for the suggestion by edit
// distance, which the policy does not make (it names the first declared
// names under the prefix instead; TestClaimedPrefixDifference).
func TestClaimedPrefixAgree(t *testing.T) {
	set := &annotation.Set{}
	set.MustDeclare(annotation.Annotation{Name: "lb.example.com/health-check", Kind: annotation.KindString, Doc: "d"})
	set.MustDeclare(annotation.Annotation{Name: "lb.example.com/proxy-protocol", Kind: annotation.KindBool, Doc: "d"})
	set.MustDeclare(annotation.Annotation{Name: "other.example.com/x", Kind: annotation.KindBool, Doc: "d"})
	set.MustClaimPrefix("lb.example.com/")
	p := newPolicies(set).of(t, allCaps)
	for _, kv := range [][]string{
		{"lb.example.com/Health-Check", "tcp"},                                // case only
		{"LB.example.com/health-check", "tcp"},                                // the prefix's case
		{"lb.example.com/zzzzzzzzzzzz", "1"},                                  // nothing close
		{"lb.example.com/" + strings.Repeat("q", 300), "1"},                   // a key cut in the message
		{"lb.example.com/b", "1", "lb.example.com/a\x1b", "1"},                // the first by name
		{"lb.example.com/health-check", "tcp", "other.example.com/y", "true"}, // declared, and unclaimed
		{"lb.example.com/proxy-protocol", "maybe", "lb.example.com/PROXY-protocol", "true"},
	} {
		svc := lbService(annotated(kv...))
		want := reconciler(svc, set, allCaps)
		if len(want) > 1 && len(kv) > 2 && strings.Contains(want[0], "not declared") && strings.Contains(want[1], "not declared") {
			want = want[:1] // the policy names the first undeclared key of a prefix only
		}
		// The order may differ: the Reconciler sorts malformed and
		// undeclared keys together, the policy checks prefixes after the
		// declared annotations.
		got := p.evaluate(t, svc, nil)
		slices.Sort(want)
		slices.Sort(got.Denied)
		if diff := cmp.Diff(verdict{Denied: want}, got); diff != "" {
			t.Errorf("%q: the policy and the Reconciler disagree (-Reconciler +policy):\n%s", kv, diff)
		}
	}
	// An unchanged old value passes, as for every annotation.
	old := lbService(annotated("lb.example.com/Health-Check", "tcp"))
	if got := p.evaluate(t, old, old); len(got.Denied) > 0 || len(got.Errors) > 0 {
		t.Errorf("an update keeping an undeclared key: %+v, want admitted", got)
	}
}

// TestClaimedPrefixFoldTie: of two declared names that differ only by
// case, a key matching both but for case is pointed to the least by name,
// as the Reconciler points it.
func TestClaimedPrefixFoldTie(t *testing.T) {
	set := &annotation.Set{}
	set.MustDeclare(annotation.Annotation{Name: "lb.example.com/Ab", Kind: annotation.KindBool, Doc: "d"})
	set.MustDeclare(annotation.Annotation{Name: "lb.example.com/aB", Kind: annotation.KindBool, Doc: "d"})
	set.MustClaimPrefix("lb.example.com/")
	p := newPolicies(set).of(t, allCaps)
	svc := lbService(annotated("lb.example.com/ab", "true"))
	want := reconciler(svc, set, allCaps)
	if len(want) != 1 || !strings.Contains(want[0], `expected "lb.example.com/Ab"`) {
		t.Fatalf("the Reconciler says %q; want the least name suggested", want)
	}
	if diff := cmp.Diff(verdict{Denied: want}, p.evaluate(t, svc, nil)); diff != "" {
		t.Errorf("the policy and the Reconciler disagree (-Reconciler +policy):\n%s", diff)
	}
}

// TestClaimedPrefixDifference pins the known difference: for a key one
// edit from a declared name the Reconciler suggests that name, the policy
// the first declared names under the prefix.
func TestClaimedPrefixDifference(t *testing.T) {
	set := &annotation.Set{}
	set.MustDeclare(annotation.Annotation{Name: "lb.example.com/affinity", Kind: annotation.KindString, Doc: "d"})
	set.MustDeclare(annotation.Annotation{Name: "lb.example.com/health-check", Kind: annotation.KindString, Doc: "d"})
	set.MustClaimPrefix("lb.example.com/")
	p := newPolicies(set).of(t, allCaps)
	svc := lbService(annotated("lb.example.com/helth-check", "tcp"))
	const head = `annotation "lb.example.com/helth-check": not declared under prefix "lb.example.com/": expected a declared annotation, such as "lb.example.com/health-check"`
	if diff := cmp.Diff([]string{head}, reconciler(svc, set, allCaps)); diff != "" {
		t.Errorf("the Reconciler (-want +got):\n%s", diff)
	}
	const policy = `annotation "lb.example.com/helth-check": not declared under prefix "lb.example.com/": expected a declared annotation, such as "lb.example.com/affinity" or "lb.example.com/health-check"`
	if diff := cmp.Diff(verdict{Denied: []string{policy}}, p.evaluate(t, svc, nil)); diff != "" {
		t.Errorf("the policy (-want +got):\n%s", diff)
	}
}
