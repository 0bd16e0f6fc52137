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
		folded := strings.ToLower(p) // ClaimPrefix takes ASCII only in the domain; ToLower folds the rest as hasPrefixFold does for ASCII
		var names, under []string
		byFold := map[string]string{}
		for _, a := range declared {
			names = append(names, lit(a.Name)+": true")
			byFold[strings.ToLower(a.Name)] = a.Name
			if strings.HasPrefix(a.Name, p) {
				under = append(under, a.Name)
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
					let("m", "u.min()", quote("m")), lit(head), strings.Join(folds, ", "), lit(underText(under)))),
			Message: fmt.Sprintf("an annotation under prefix %q is not declared: expected a declared annotation", p),
			Reason:  reasonInvalid(),
		})
	}
	return out
}

// underText is the Reconciler's suggestion without a close name
// (annotation's suggest): the first declared names under the prefix.
func underText(under []string) string {
	quoted := make([]string, 0, 3)
	for _, n := range under[:min(3, len(under))] {
		quoted = append(quoted, fmt.Sprintf("%q", n))
	}
	switch len(quoted) {
	case 0:
		return "no annotation under it: none is declared there"
	case 1:
		return "a declared annotation, such as " + quoted[0]
	}
	return "a declared annotation, such as " + strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}
