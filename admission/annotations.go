package admission

import (
	"errors"
	"fmt"
	"math"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ccmkit/ccmkit/annotation"
)

// quotedVariable is the variable "quoted": the values the messages quote,
// each as the Reconciler quotes a value (see quote), in order: the declared
// annotations' (names; "" for an absent one), then spec.loadBalancerIP
// (the requestedIP variable). It is one list so that the quoting is written
// once.
func quotedVariable(names []string) admissionregistrationv1.Variable {
	values := make([]string, 0, len(names)+1)
	for _, n := range names {
		values = append(values, fmt.Sprintf("string(variables.annotations[?%s].orValue(''))", lit(n)))
	}
	values = append(values, "string(variables.requestedIP)")
	return admissionregistrationv1.Variable{Name: "quoted", Expression: fmt.Sprintf("[\n  %s\n].map(v,\n  %s)", strings.Join(values, ",\n  "), quote("v"))}
}

// annotationValidation is the validation of the declared annotation a, the
// i-th of the quoted variable: present, it must have the value the
// Reconciler accepts (annotation.Annotation's canonical parse), unless it
// is the old Service's value. The message is the Reconciler's
// (annotation.Error.Error).
func annotationValidation(a *annotation.Annotation, i int) admissionregistrationv1.Validation {
	name := lit(a.Name)
	value := fmt.Sprintf("variables.annotations[%s]", name)
	head := fmt.Sprintf("annotation %q: invalid value ", a.Name)
	tail := ": expected " + a.Expected()
	msgTail := lit(tail)
	if a.Kind == annotation.KindString {
		// annotation's canonical: a value holding a hidden character
		// expects one without.
		msgTail = fmt.Sprintf("(%s.trim().matches(%s) ? %s : %s)", value, rx(hiddenChars), lit(": expected "+hiddenExpected(a)), lit(tail))
	}
	return admissionregistrationv1.Validation{
		Expression: fmt.Sprintf("!(%s in variables.annotations) ||\n(%s in variables.oldAnnotations && variables.oldAnnotations[%s] == %s) ||\n%s",
			name, name, name, value, letBool("v", value+".trim()", valid(a, "v"))),
		MessageExpression: fmt.Sprintf("%s + variables.quoted[%d] + %s", lit(head), i, msgTail),
		Message:           fmt.Sprintf("annotation %q: invalid value%s", a.Name, tail),
		Reason:            reasonInvalid(),
	}
}

// valid returns CEL that is true when v, the value with surrounding white
// space trimmed (strings.TrimSpace, which CEL's trim is), is what
// annotation.Annotation.canonical accepts for a's kind.
func valid(a *annotation.Annotation, v string) string {
	switch a.Kind {
	case annotation.KindBool:
		return fmt.Sprintf("%s == 'true' || %s == 'false'", v, v)
	case annotation.KindInt:
		return validInt(a, v)
	case annotation.KindDuration:
		return validDuration(v)
	case annotation.KindEnum:
		values := make([]string, len(a.Values))
		for i, s := range a.Values {
			values[i] = lit(s)
		}
		return fmt.Sprintf("%s in [%s]", v, strings.Join(values, ", "))
	case annotation.KindIP:
		return ipSyntax(v)
	case annotation.KindCIDRList:
		// parseCIDRList: split at commas, each entry trimmed.
		return fmt.Sprintf("%s.split(',').all(e, %s)", v, letBool("c", "e.trim()", cidrSyntax("c")))
	}
	return fmt.Sprintf("%s != '' && !%s.matches(%s)", v, v, rx(hiddenChars))
}

// hiddenChars matches a character a KindString value must not hold
// (annotation/text.go hiddenRune): C0 and C1 control characters and DEL,
// U+061C, the zero-width and direction marks U+200B to U+200F, the line
// and paragraph separators and bidirectional embeddings and overrides
// U+2028 to U+202E, the isolates U+2066 to U+2069 and the byte-order mark.
// TestHiddenCharsAgree checks it against the Reconciler, rune by rune.
const hiddenChars = `[\x00-\x1f\x7f-\x9f\x{061c}\x{200b}-\x{200f}\x{2028}-\x{202e}\x{2066}-\x{2069}\x{feff}]`

// hiddenExpected is what the Reconciler expects of the value of a, a
// KindString annotation, when it holds such a character: its own words,
// from its error for a NUL.
func hiddenExpected(a *annotation.Annotation) string {
	_, _, err := a.Canonical(map[string]string{a.Name: "\x00"})
	return expectedOf(err)
}

// expectedOf returns the Expected of err, the Reconciler's *annotation.Error
// for a value the policy words a message about. Policy generation is
// offline: asking the Reconciler for its words keeps them in one place.
func expectedOf(err error) string {
	var e *annotation.Error
	if !errors.As(err, &e) {
		panic(fmt.Sprintf("admission: the Reconciler's error %v is not an *annotation.Error", err)) // not reached: see the callers
	}
	return e.Expected
}

// validInt is strconv.ParseInt(v, 10, 64) and the bounds: a sign, digits,
// and a magnitude within int64, checked on the significant digits before
// int() converts (a conversion error would be the user's message).
func validInt(a *annotation.Annotation, v string) string {
	s := fmt.Sprintf("%s.matches(%s) &&\n  %s", v, rx(`^[+-]?[0-9]+$`),
		letBool("d", v+".find('[1-9][0-9]*')", fmt.Sprintf("size(d) < 19 || (size(d) == 19 && d <= (%s.startsWith('-') ? '%d' : '%d'))",
			v, uint64(math.MaxInt64)+1, int64(math.MaxInt64))))
	if a.Min == 0 && a.Max == 0 {
		return s
	}
	if a.Min > math.MinInt64 {
		s += fmt.Sprintf(" &&\n  int(%s) >= %d", v, a.Min)
	}
	if a.Max < math.MaxInt64 {
		s += fmt.Sprintf(" &&\n  int(%s) <= %d", v, a.Max)
	}
	return s
}

// Go durations (time.ParseDuration): an optional sign, then "0" or one or
// more components of a decimal number (digits before or after a point)
// and a unit.
const (
	durationUnits     = `(ns|us|µs|μs|ms|s|m|h)`
	durationComponent = `([0-9]+(\.[0-9]*)?|\.[0-9]+)` + durationUnits
	durationSyntax    = `^[-+]?(0|(` + durationComponent + `)+)$`
	// durationHuge finds an integer part of 20 significant digits or
	// more (not after a point): at least 10^19 of any unit, over the
	// largest duration.
	durationHuge = `(^|[^0-9.])0*[1-9][0-9]{19}`
	// durationUnitNanos are the units in nanoseconds.
	durationUnitNanos = "{'ns': 1.0, 'us': 1e3, 'µs': 1e3, 'μs': 1e3, 'ms': 1e6, 's': 1e9, 'm': 6e10, 'h': 3.6e12}"
	// durationBelowMax bounds the sum of the components, in float64
	// nanoseconds, under which time.ParseDuration cannot overflow: the
	// largest duration, 2^63-1 ns, less about 1.8ms, a margin above the
	// float64 rounding of a sum of at most maxDurationComponents
	// components (each parse, product and sum off by at most 2^-53 of
	// 2^63 ns, 1024ns: 0.2ms in all). A duration within the margin, more
	// than 2562047h47m16.853s, is refused although Go takes it: see the
	// package doc.
	durationBelowMax = "9.223372036853e18"
)

// validDuration is time.ParseDuration(v) without error and not negative.
// duration() is time.ParseDuration, whose error (an overflow) would be
// the user's message: the syntax is checked first, then the magnitude, in
// float64, which cannot overflow once no integer part has 20 significant
// digits.
func validDuration(v string) string {
	sum := letBool("cs", fmt.Sprintf("%s.findAll(%s, %d)", v, rx(durationComponent), maxDurationComponents+1),
		fmt.Sprintf("size(cs) <= %d && cs.map(c, double(c.find('^[0-9.]+')) * %s[c.find('[^0-9.]+$')]).sum() < %s", maxDurationComponents, durationUnitNanos, durationBelowMax))
	return fmt.Sprintf("%s.matches(%s) && !%s.matches(%s) &&\n  %s &&\n  duration(%s) >= duration('0s')",
		v, rx(durationSyntax), v, rx(durationHuge), sum, v)
}

// maxDurationComponents bounds the components of a duration the policy
// sums, for the CEL cost (a sum per component): "1h2m3s4ms5us6ns" has
// six; a value of more, such as "1s" 65 times, is refused although Go
// takes it (see the package doc).
const maxDurationComponents = 64

// reasonInvalid is the reason of every validation: the Reconciler's
// errors are the user's input to fix (HTTP 422).
func reasonInvalid() *metav1.StatusReason {
	r := metav1.StatusReasonInvalid
	return &r
}
