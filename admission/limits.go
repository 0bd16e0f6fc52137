package admission

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/ccmkit/ccmkit/internal/clip"
)

// MaxObjectBytes bounds the size of the ValidatingAdmissionPolicy that
// Policy and WriteYAML return, in bytes of its JSON encoding: 1.5 MiB,
// 1572864 bytes, etcd's default request limit (--max-request-bytes,
// DefaultMaxRequestBytes = 1.5 * 1024 * 1024 in go.etcd.io/etcd/server/v3
// embed/config.go), which the apiserver's own limits are built on
// (k8s.io/apiserver pkg/server/config.go: a request body of up to 3 MiB
// is read because JSON shrinks when stored as protobuf, and etcd refuses
// to store more than 1.5 MiB). An object over it is refused by the
// apiserver of a default cluster ("etcdserver: request is too large").
// The JSON of a policy is larger than the protobuf the apiserver stores
// (by some 15% for long enum lists), which leaves room for the metadata
// the apiserver adds (uid, managedFields). Note that `kubectl apply`
// without --server-side copies the object into an annotation, which the
// apiserver bounds to 256 KiB: apply a larger policy with --server-side
// or `kubectl create`.
const MaxObjectBytes = 1572864

// maxExpressionCodePoints bounds each CEL expression of the policy: the
// CEL parser refuses a longer one ("expression code point size exceeds
// limit"; github.com/google/cel-go parser/parser.go, NewParser's default
// of 100_000), and the apiserver keeps that default (k8s.io/apiserver
// pkg/cel/environment sets no cel.ParserExpressionSizeLimit), so that it
// refuses to store a policy with one.
const maxExpressionCodePoints = 100_000

// maxLargest is the number of annotations the size error names.
const maxLargest = 5

// checkSize returns an error when p, built with parts, is a policy the
// apiserver refuses for its size: over MaxObjectBytes, naming the
// annotations that add the most to it, or with an expression over
// maxExpressionCodePoints, naming the annotation or variable that has
// it.
func checkSize(p *admissionregistrationv1.ValidatingAdmissionPolicy, parts []annotationPart) error {
	if n := jsonSize(p); n > MaxObjectBytes {
		return fmt.Errorf("PolicyInput.Annotations (%d declared) make a ValidatingAdmissionPolicy of %d bytes (JSON), the largest %s: expected at most %d bytes (admission.MaxObjectBytes, etcd's default request limit): split the declarations or shorten enum lists",
			len(parts), n, largest(parts), MaxObjectBytes)
	}
	for _, part := range parts {
		for _, e := range part.expressions() {
			if n := utf8.RuneCountInString(e.text); n > maxExpressionCodePoints {
				return fmt.Errorf("PolicyInput.Annotations: annotation %q: the %s is %d code points of CEL: expected at most %d (the CEL parser's limit in the apiserver): declare fewer or shorter Values",
					part.name, e.what, n, maxExpressionCodePoints)
			}
		}
	}
	for _, v := range p.Spec.Variables {
		if n := utf8.RuneCountInString(v.Expression); n > maxExpressionCodePoints {
			return fmt.Errorf("PolicyInput.Annotations (%d declared): the policy's variable %q is %d code points of CEL: expected at most %d (the CEL parser's limit in the apiserver): declare fewer annotations",
				len(parts), v.Name, n, maxExpressionCodePoints)
		}
	}
	return nil
}

// expression is one CEL expression of an annotation's part, and what it
// is, for the error.
type expression struct{ what, text string }

// expressions returns the CEL expressions of part.
func (part annotationPart) expressions() []expression {
	var es []expression
	for i, v := range part.validations {
		what := "validation"
		if i > 0 {
			what = "validation of its PORTs"
		}
		es = append(es, expression{what + "'s expression", v.Expression}, expression{what + "'s messageExpression", v.MessageExpression})
	}
	for _, v := range part.variables {
		es = append(es, expression{fmt.Sprintf("variable %q", v.Name), v.Expression})
	}
	return es
}

// size returns the bytes part adds to the policy's JSON: those of its
// validations and variables.
func (part annotationPart) size() int {
	n := 0
	for _, v := range part.validations {
		n += jsonSize(v)
	}
	for _, v := range part.variables {
		n += jsonSize(v)
	}
	return n
}

// largest words the maxLargest parts of the largest size, largest
// first (by name when equal), as `annotation "a" (12 bytes), "b" (10
// bytes)`, or "annotation: none" when there are none.
func largest(parts []annotationPart) string {
	type sized struct {
		name  string
		bytes int
	}
	all := make([]sized, len(parts))
	for i, part := range parts {
		all[i] = sized{part.name, part.size()}
	}
	slices.SortStableFunc(all, func(a, b sized) int { return cmp.Compare(b.bytes, a.bytes) }) // parts are sorted by name
	if len(all) > maxLargest {
		all = all[:maxLargest]
	}
	words := make([]string, len(all))
	for i, s := range all {
		words[i] = fmt.Sprintf("%q (%d bytes)", clip.Quoted(s.name), s.bytes)
	}
	if len(words) == 0 {
		return "annotation: none"
	}
	return "annotations " + strings.Join(words, ", ")
}

// jsonSize is the length of v's JSON encoding. The API types always
// marshal.
func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		panic("admission: " + err.Error()) // not reached: API types marshal
	}
	return len(b)
}
