package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/ccmkit/ccmkit/annotation"
)

// claimedValidations are the checks of the prefixes the declarations claim
// (annotation.Set.ClaimPrefix): a Service annotation under a claimed
// prefix (ASCII case ignored, as the Reconciler compares) must be
// declared, unless it is the old Service's with the same value. One
// validation per prefix, whose message is the Reconciler's for the first
// such key by name: annotation.Error with Prefix, suggesting the declared
// name that differs only by case, or else naming the first declared
// names under the prefix. The Reconciler also suggests a name within a
// small edit distance, and reports up to ten keys; the policy does
// neither (see the package doc's known differences).
func claimedValidations(set *annotation.Set) []admissionregistrationv1.Validation {
	var out []admissionregistrationv1.Validation
	declared := set.All()
	for _, p := range set.Prefixes() {
		folded := strings.ToLower(p) // a claimed prefix is ASCII: CEL's lowerAscii
		// A key under p is, or is but for case, only a declared name
		// under p without regard to case: the others cannot match.
		var names []string
		byFold := map[string]string{}
		for _, a := range declared {
			if fold := strings.ToLower(a.Name); strings.HasPrefix(fold, folded) {
				names = append(names, lit(a.Name)+": true")
				if _, taken := byFold[fold]; !taken {
					byFold[fold] = a.Name // the least by name, as annotation's Set keeps
				}
			}
		}
		undeclared := fmt.Sprintf("k.lowerAscii().startsWith(%s) && !(k in {%s}) &&\n  !(k in variables.oldAnnotations && variables.oldAnnotations[k] == variables.annotations[k])",
			lit(folded), strings.Join(names, ", "))
		var folds []string
		for _, f := range slices.Sorted(maps.Keys(byFold)) {
			folds = append(folds, lit(f)+": "+lit(fmt.Sprintf("%q (annotation names are case-sensitive)", byFold[f])))
		}
		head := fmt.Sprintf(": not declared under prefix %q: expected ", p)
		out = append(out, admissionregistrationv1.Validation{
			Expression: fmt.Sprintf("!variables.annotations.exists(k,\n  %s)", undeclared),
			MessageExpression: let("u", fmt.Sprintf("variables.annotations.filter(k,\n  %s)", undeclared),
				fmt.Sprintf("size(u) == 0 ? '' :\n'annotation ' + %s + %s + {%s}[?u.min().lowerAscii()].orValue(%s)",
					let("m", "u.min()", quote("m")), lit(head), strings.Join(folds, ", "), lit(underText(set, p)))),
			Message: fmt.Sprintf("an annotation under prefix %q is not declared: expected a declared annotation", p),
			Reason:  reasonInvalid(),
		})
	}
	return out
}

// underText is the Reconciler's suggestion under p without a close name:
// the first declared names under p. It is the Expected of Validate's
// error for a key that no declared name is close to: p and a NUL, which
// no name holds, one byte after p being too short for a suggestion by
// edit distance (TestClaimedPrefixAgree checks the words against the
// Reconciler's).
func underText(set *annotation.Set, p string) string {
	return expectedOf(set.Validate(map[string]string{p + "\x00": ""}))
}
