package annotation

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ccmkit/ccmkit/internal/cidr"
	"github.com/ccmkit/ccmkit/internal/clip"
)

// Kind is the value type of a declared annotation. Its value is
// the name used in the Markdown reference.
type Kind string

// The annotation kinds and the values they accept. Surrounding white space
// is ignored for every kind.
const (
	// KindBool accepts "true" or "false" (exactly these).
	KindBool Kind = "bool"
	// KindInt accepts a base-10 integer, within [Min, Max] when bounded.
	KindInt Kind = "int"
	// KindDuration accepts a non-negative Go duration ("30s", "1m30s").
	KindDuration Kind = "duration"
	// KindEnum accepts exactly one of Values.
	KindEnum Kind = "enum"
	// KindIP accepts one IPv4 or IPv6 address without zone.
	KindIP Kind = "IP"
	// KindCIDRList accepts a comma-separated, non-empty list of CIDRs
	// ("10.0.0.0/8, 2001:db8::/32"); host bits are masked off.
	KindCIDRList Kind = "CIDR list"
	// KindString accepts any non-empty string without control or
	// invisible characters: no C0 or C1 control character
	// (NUL, tab, newline, carriage return, ESC, DEL, ...), no
	// zero-width, direction-mark, bidirectional-override or -isolate
	// character and no byte-order mark. Such a value reads other than it
	// is in a terminal or an event; its error quotes the value escaped
	// and unwraps to the character and its byte offset. Surrounding white space, such as the newline a YAML block
	// scalar ends with, is trimmed first, as for every kind. The other
	// kinds need no such rule: their syntax admits none of these
	// characters, and their errors quote the value escaped ("tr\x00ue").
	KindString Kind = "string"
)

// Annotation declares one annotation of a provider. Declare it with
// Set.Declare; the *Annotation returned is immutable and its
// methods are safe for concurrent use.
//
// Every typed getter (Bool, Int, Duration, Enum, Text, IP, CIDRs) returns
// (value, set, err): when the annotation is present, value is its parsed
// value and set is true; when absent, value is the declared Default (or the
// zero value) and set is false, so "not set" is distinguishable from "set to
// the default". A malformed value is an *Error
// (errors.Is(err, ErrInvalid)); it never falls back to the
// default. Calling a getter of another kind is an error, not a panic. A
// PerPort annotation is read with Ports (and Canonical); its typed getters
// return that error too.
type Annotation struct {
	// Name is the annotation key, a qualified name such as
	// "lb.example.com/algorithm".
	Name string
	// Kind is the value type.
	Kind Kind
	// Default is the value used when the annotation is absent, written as
	// a user would write it; "" means no default. It must parse. For a
	// PerPort annotation it is one value of Kind (not a list of entries):
	// the value of every port the annotation does not list.
	Default string
	// Doc describes the annotation for the Markdown reference (required).
	Doc string
	// Values are the allowed values of a KindEnum annotation.
	Values []string
	// Min and Max bound a KindInt annotation (inclusive) when either is
	// non-zero.
	Min, Max int64
	// Setting makes loadbalancer.Desired copy the annotation's canonical
	// value into loadbalancer.Spec.Settings, so that loadbalancer.Plan
	// keeps the cloud in sync with it.
	Setting bool
	// PerPort makes the value not one value but one per Service port: a
	// comma-separated list of PORT=VALUE entries such as
	// "443=true,https=false". PORT names a Service port by its number
	// (1 to 65535, base 10, without sign or leading zeros) or its name (a
	// DNS-1123 label, as a Service port name is, so that "0443" is a
	// name); each PORT is listed once. Each VALUE is parsed as the value
	// of an annotation of Kind that is not per port. White space around
	// entries, ports and values is ignored. The canonical form lists the
	// entries sorted (port numbers ascending, then names in byte order)
	// as PORT=VALUE with VALUE canonical, joined by "," without spaces.
	// Read it with Ports; Default is the value of every port not listed.
	// KindCIDRList cannot be per port (its values contain commas), nor
	// can an enum with a comma in one of its Values.
	PerPort bool
}

// ErrInvalid marks a malformed annotation value, input the user can fix on
// the object; the concrete error is an *Error. Errors are wrapped: test
// with errors.Is.
var ErrInvalid = errors.New("invalid annotation")

// Error is a malformed annotation value.
// errors.Is(err, ErrInvalid) is true; Unwrap returns the parse
// error, if any.
type Error struct {
	Name     string // the annotation key
	Value    string // the value as found on the object
	Expected string // what would have been accepted
	Err      error
	// Prefix is set when Name is not declared but begins with a prefix
	// the Set claims (Set.ClaimPrefix): it is that prefix, as claimed,
	// and Expected names the declared annotation Name most likely means
	// or some declared under the prefix. It is "" for a malformed value.
	Prefix string
}

// Error names the annotation, the value and what was expected.
// The value is quoted cut to clip.MaxQuoted bytes (at a rune boundary), so a
// huge malformed annotation does not make a huge error, event or log line.
func (e *Error) Error() string {
	if e.Prefix != "" {
		return fmt.Sprintf("annotation %q: not declared under prefix %q: expected %s", cut(e.Name), cut(e.Prefix), e.Expected)
	}
	return fmt.Sprintf("annotation %q: invalid value %q: expected %s", cut(e.Name), cut(e.Value), e.Expected)
}

// cut returns s cut to clip.MaxQuoted bytes with its length (clip.Quoted).
func cut(s string) string { return clip.Quoted(s) }

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the underlying parse error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Set is a provider's declared annotations. The zero value is an
// empty set ready to use. Declare all annotations first (typically in
// package-level variables via MustDeclare); Declare is not safe for
// concurrent use, every other method is safe for concurrent use once
// declaration is done.
type Set struct {
	byName   map[string]*Annotation
	list     []*Annotation // sorted by name
	prefixes []string      // claimed (ClaimPrefix), sorted
	// byFold maps each declared name in lower case (ASCII) to the
	// declared name, the least one when several differ only by case;
	// byLen lists the declared names by length. Both serve the
	// suggestions of Validate for an undeclared name (claim.go).
	byFold map[string]string
	byLen  map[int][]string
}

// Declare validates a and adds it to the set, returning the declared
// annotation. Errors start "annotation.Set.Declare: " and name the field
// and the value: an invalid Name, an unknown Kind, a duplicate Name, a
// missing Doc, Values on a non-enum or an empty enum, Min > Max, PerPort
// with KindCIDRList or with an enum value holding a comma, or a Default
// that does not parse (that parse error is wrapped; a PerPort
// annotation's Default is one value of Kind). A Default or an enum value
// holding a control or invisible character anywhere (those KindString
// refuses, a tab or newline included) is an error
// naming the character and where it is; so is a Doc holding one other
// than a newline. Every value an error quotes is cut to clip.MaxQuoted
// bytes. Declaring an enum takes time linear in its number of Values.
func (s *Set) Declare(a Annotation) (*Annotation, error) {
	p, err := s.declare(a)
	if err != nil {
		return nil, fmt.Errorf("annotation.Set.Declare: %w", err)
	}
	return p, nil
}

// declare is Declare without the prefix. Its work is linear in the
// size of a: the enum Values are checked against a set, not each other.
func (s *Set) declare(a Annotation) (*Annotation, error) {
	if errs := validation.IsQualifiedName(a.Name); len(errs) > 0 {
		return nil, fmt.Errorf("Annotation.Name %q: expected a qualified name such as \"lb.example.com/algorithm\": %s", cut(a.Name), strings.Join(errs, "; "))
	}
	if _, dup := s.byName[a.Name]; dup {
		return nil, fmt.Errorf("Annotation.Name %q: already declared in this set: expected each name declared once", a.Name)
	}
	switch a.Kind {
	case KindBool, KindInt, KindDuration, KindEnum, KindIP, KindCIDRList, KindString:
	default:
		return nil, fmt.Errorf("annotation %q: Kind %q: expected one of bool, int, duration, enum, IP, CIDR list, string", a.Name, cut(string(a.Kind)))
	}
	if err := a.checkText(); err != nil {
		return nil, err
	}
	if err := a.checkValues(); err != nil {
		return nil, err
	}
	if a.Kind != KindInt && (a.Min != 0 || a.Max != 0) {
		return nil, fmt.Errorf("annotation %q: Min %d, Max %d: expected none for kind %s", a.Name, a.Min, a.Max, a.Kind)
	}
	if a.Min > a.Max {
		return nil, fmt.Errorf("annotation %q: Min %d > Max %d: expected Min <= Max", a.Name, a.Min, a.Max)
	}
	if err := a.checkPerPort(); err != nil {
		return nil, err
	}
	a.Values = slices.Clone(a.Values)
	if a.Default != "" {
		c, err := a.canonicalPlain(a.Default)
		if err != nil {
			return nil, fmt.Errorf("annotation %q: Default: %w", a.Name, err)
		}
		a.Default = c
	}
	p := &a
	s.add(p)
	return p, nil
}

// checkText refuses a Doc that is blank or holds a character hidden
// refuses (but newlines), and a Default that holds one anywhere, even
// where surrounding white space would be trimmed: a Default is the
// provider's code, where such a character is a mistake.
func (a *Annotation) checkText() error {
	if strings.TrimSpace(a.Doc) == "" {
		return fmt.Errorf("annotation %q: Doc is empty: expected a description for the reference", a.Name)
	}
	if where, found := hidden(a.Doc, true); found {
		return fmt.Errorf("annotation %q: Doc holds %s: expected text without control or invisible characters (newlines are fine)", a.Name, where.String())
	}
	if where, found := hidden(a.Default, false); found {
		return fmt.Errorf("annotation %q: Default %q holds %s: expected a value without control or invisible characters", a.Name, cut(a.Default), where.String())
	}
	return nil
}

// checkValues checks the Values of an enum: at least one, each non-empty,
// without surrounding space or a character hidden refuses, and each once
// (a set, so that declaring n values takes time linear in n); none for
// another kind.
func (a *Annotation) checkValues() error {
	if a.Kind != KindEnum {
		if len(a.Values) > 0 {
			return fmt.Errorf("annotation %q: Values %s: expected none for kind %s", a.Name, quoteList(a.Values, maxListed), a.Kind)
		}
		return nil
	}
	if len(a.Values) == 0 {
		return fmt.Errorf("annotation %q: Values is empty: expected the allowed values of the enum", a.Name)
	}
	seen := make(map[string]int, len(a.Values))
	for i, v := range a.Values {
		if where, found := hidden(v, false); found {
			return fmt.Errorf("annotation %q: Values[%d] %q holds %s: expected a value without control or invisible characters", a.Name, i, cut(v), where.String())
		}
		if v == "" || strings.TrimSpace(v) != v {
			return fmt.Errorf("annotation %q: Values[%d] %q: expected a non-empty, unique value without surrounding space", a.Name, i, cut(v))
		}
		if first, dup := seen[v]; dup {
			return fmt.Errorf("annotation %q: Values[%d] %q repeats Values[%d]: expected a non-empty, unique value without surrounding space", a.Name, i, cut(v), first)
		}
		seen[v] = i
	}
	return nil
}

// add adds the declared annotation p to the set and its indexes.
func (s *Set) add(p *Annotation) {
	if s.byName == nil {
		s.byName = map[string]*Annotation{}
		s.byFold = map[string]string{}
		s.byLen = map[int][]string{}
	}
	s.byName[p.Name] = p
	i, _ := slices.BinarySearchFunc(s.list, p.Name, func(x *Annotation, n string) int { return strings.Compare(x.Name, n) })
	s.list = slices.Insert(s.list, i, p)
	fold := lower(p.Name)
	if prev, ok := s.byFold[fold]; !ok || p.Name < prev {
		s.byFold[fold] = p.Name
	}
	s.byLen[len(p.Name)] = append(s.byLen[len(p.Name)], p.Name)
}

// checkPerPort refuses what cannot be per port: a value holding a comma,
// which separates the entries of a PerPort value.
func (a *Annotation) checkPerPort() error {
	if !a.PerPort {
		return nil
	}
	if a.Kind == KindCIDRList {
		return fmt.Errorf("annotation %q: PerPort with Kind %s: expected a kind whose values hold no comma (commas separate the entries of a per-port value)", a.Name, a.Kind)
	}
	for i, v := range a.Values {
		if strings.Contains(v, ",") {
			return fmt.Errorf("annotation %q: Values[%d] %q: expected no comma in the values of a PerPort enum (commas separate its entries)", a.Name, i, cut(v))
		}
	}
	return nil
}

// MustDeclare is Declare that panics on error. It is meant for
// package-level declarations, where an error is a programming mistake.
func (s *Set) MustDeclare(a Annotation) *Annotation {
	p, err := s.Declare(a)
	if err != nil {
		panic(err)
	}
	return p
}

// Lookup returns the declared annotation with this name. A nil *Set
// declares nothing.
func (s *Set) Lookup(name string) (*Annotation, bool) {
	if s == nil {
		return nil, false
	}
	a, ok := s.byName[name]
	return a, ok
}

// All returns the declared annotations sorted by name (a new slice of
// shared, immutable annotations); nil for a nil *Set.
func (s *Set) All() []*Annotation {
	if s == nil {
		return nil
	}
	return slices.Clone(s.list)
}

// Validate parses every declared annotation present in annotations and
// reports each malformed one, and each annotation under a claimed prefix
// (ClaimPrefix) that is not declared, naming the declared annotation it
// most likely means: errors.Join of *Error sorted by annotation name,
// or nil. An undeclared annotation under no claimed prefix is ignored,
// even one that is a declared name but for case. At most 10 undeclared
// annotations are reported one by one (those first by name); the others
// are counted in one last error, which wraps ErrInvalid. A nil *Set
// declares none.
func (s *Set) Validate(annotations map[string]string) error {
	if s == nil {
		return nil
	}
	var malformed []namedError
	for _, a := range s.list {
		if raw, ok := annotations[a.Name]; ok {
			if _, err := a.canonical(raw); err != nil {
				malformed = append(malformed, namedError{a.Name, err})
			}
		}
	}
	undeclared, more := s.undeclared(annotations)
	errs := mergeByName(malformed, undeclared)
	if more > 0 {
		errs = append(errs, fmt.Errorf("%w: %d more annotations under the prefixes %s are not declared: expected declared annotations only", ErrInvalid, more, quoteList(s.prefixes, maxListed)))
	}
	return errors.Join(errs...)
}

// namedError is an error about the annotation name.
type namedError struct {
	name string
	err  error
}

// mergeByName merges x and y, each sorted by name, into one list sorted
// by name.
func mergeByName(x []namedError, y []*Error) []error {
	out := make([]error, 0, len(x)+len(y)+1)
	for len(x) > 0 && len(y) > 0 {
		if y[0].Name < x[0].name {
			out, y = append(out, y[0]), y[1:]
		} else {
			out, x = append(out, x[0].err), x[1:]
		}
	}
	for _, e := range x {
		out = append(out, e.err)
	}
	for _, e := range y {
		out = append(out, e)
	}
	return out
}

// Canonical returns the annotation's value in canonical form (the form used
// in loadbalancer.Spec.Settings: "true", "42", "1m30s", "10.0.0.0/8,2001:db8::/32", ...)
// and whether it is set; when absent it returns the canonical Default ("" if
// none) and false. Works for every kind, and for a PerPort annotation,
// whose canonical form is its sorted list of entries ("443=true,https=false")
// when present and its Default, one value, when absent.
func (a *Annotation) Canonical(annotations map[string]string) (string, bool, error) {
	raw, ok := annotations[a.Name]
	if !ok {
		return a.Default, false, nil
	}
	c, err := a.canonical(raw)
	return c, true, err
}

// Bool returns a KindBool annotation's value (see Annotation).
func (a *Annotation) Bool(annotations map[string]string) (bool, bool, error) {
	v, set, err := a.get(annotations, KindBool)
	return v == "true", set, err
}

// Int returns a KindInt annotation's value (see Annotation).
func (a *Annotation) Int(annotations map[string]string) (int64, bool, error) {
	v, set, err := a.get(annotations, KindInt)
	if v == "" || err != nil {
		return 0, set, err
	}
	n, _ := strconv.ParseInt(v, 10, 64) // canonical: cannot fail
	return n, set, nil
}

// Duration returns a KindDuration annotation's value (see Annotation).
func (a *Annotation) Duration(annotations map[string]string) (time.Duration, bool, error) {
	v, set, err := a.get(annotations, KindDuration)
	if v == "" || err != nil {
		return 0, set, err
	}
	d, _ := time.ParseDuration(v) // canonical: cannot fail
	return d, set, nil
}

// Enum returns a KindEnum annotation's value (see Annotation).
func (a *Annotation) Enum(annotations map[string]string) (string, bool, error) {
	return a.get(annotations, KindEnum)
}

// Text returns a KindString annotation's value (see Annotation).
func (a *Annotation) Text(annotations map[string]string) (string, bool, error) {
	return a.get(annotations, KindString)
}

// IP returns a KindIP annotation's value (see Annotation); the zero Addr
// when absent without default.
func (a *Annotation) IP(annotations map[string]string) (netip.Addr, bool, error) {
	v, set, err := a.get(annotations, KindIP)
	if v == "" || err != nil {
		return netip.Addr{}, set, err
	}
	ip, _ := netip.ParseAddr(v) // canonical: cannot fail
	return ip, set, nil
}

// CIDRs returns a KindCIDRList annotation's value (see Annotation): masked,
// sorted (IPv4 first), without duplicates; nil when absent without default.
func (a *Annotation) CIDRs(annotations map[string]string) ([]netip.Prefix, bool, error) {
	v, set, err := a.get(annotations, KindCIDRList)
	if v == "" || err != nil {
		return nil, set, err
	}
	ps, _ := parseCIDRList(v) // canonical: cannot fail
	return ps, set, nil
}

// get returns the canonical value of an annotation of kind k that is not
// per port.
func (a *Annotation) get(annotations map[string]string, k Kind) (string, bool, error) {
	if a.Kind != k || a.PerPort {
		return "", false, fmt.Errorf("annotation %q is declared as %s, not %s", a.Name, a.kindName(), k)
	}
	return a.Canonical(annotations)
}

// kindName is the kind, and "per port" after it for a PerPort
// annotation: "bool per port".
func (a *Annotation) kindName() string {
	if a.PerPort {
		return string(a.Kind) + " per port"
	}
	return string(a.Kind)
}

// Expected words what the annotation accepts, as the end of a sentence
// "expected …": `"true" or "false"`, "an integer from 1 to 100", `one of
// "round-robin", "least-connections"`; for a PerPort annotation, the
// syntax of its entries with an example and what each VALUE must be
// (`comma-separated PORT=VALUE entries such as "443=true,https=false",
// each PORT …, and each VALUE "true" or "false"`). It is the Expected of
// the *Error a malformed value makes (which, for a PerPort annotation,
// adds the entry at fault after ": "), and the "Accepted values" of the
// Markdown reference; package admission builds its messages from it so
// that they say what the Reconciler's do. Safe for concurrent use.
//
// Expected is bounded, as the messages it ends are: each enum value and
// the example are quoted cut to clip.MaxQuoted bytes, and an enum whose
// quoted values pass maxListed bytes in all lists the first ones and how
// many there are ("one of "a", "b", … (1000 values)"). The Markdown
// reference lists every value.
func (a *Annotation) Expected() string { return a.expected(maxListed) }

// maxListed bounds the quoted enum values that Expected lists, in bytes
// (at least one value is listed).
const maxListed = 2 * clip.MaxQuoted

// expected is Expected listing the enum values within budget bytes;
// a negative budget lists all of them, uncut (the Markdown reference).
func (a *Annotation) expected(budget int) string {
	if a.PerPort {
		example := a.example()
		if budget >= 0 {
			example = cut(example)
		}
		return fmt.Sprintf("comma-separated PORT=VALUE entries such as %q, each PORT a port number or name (a DNS-1123 label) listed once, and each VALUE %s", example, a.kindExpected(budget))
	}
	return a.kindExpected(budget)
}

// kindExpected is Expected of one value of the kind, listing the enum
// values within budget bytes (see expected).
func (a *Annotation) kindExpected(budget int) string {
	switch a.Kind {
	case KindBool:
		return `"true" or "false"`
	case KindInt:
		if a.Min != 0 || a.Max != 0 {
			return fmt.Sprintf("an integer from %d to %d", a.Min, a.Max)
		}
		return "an integer"
	case KindDuration:
		return `a non-negative duration such as "30s" or "1m30s"`
	case KindEnum:
		return "one of " + quoteList(a.Values, budget)
	case KindIP:
		return "an IPv4 or IPv6 address"
	case KindCIDRList:
		return `a comma-separated list of CIDRs such as "10.0.0.0/8,2001:db8::/32"`
	}
	return "a non-empty string"
}

// canonical parses raw, the annotation's value on an object, and returns
// its canonical form.
func (a *Annotation) canonical(raw string) (string, error) {
	if a.PerPort {
		entries, err := a.parsePorts(raw)
		if err != nil {
			return "", err
		}
		return joinPorts(entries), nil
	}
	return a.canonicalPlain(raw)
}

// canonicalPlain parses raw as one value of the kind (a Default, or the
// value of an annotation that is not per port).
func (a *Annotation) canonicalPlain(raw string) (string, error) {
	c, ok, err := a.plain(raw)
	if !ok {
		exp := a.kindExpected(maxListed)
		if h := (hiddenChar{}); errors.As(err, &h) { // KindString: where in raw, not in the trimmed value
			h.offset += len(raw) - len(strings.TrimLeftFunc(raw, unicode.IsSpace))
			exp, err = hiddenExpected, h
		}
		return "", &Error{Name: a.Name, Value: raw, Expected: exp, Err: err}
	}
	return c, nil
}

// plain parses raw, one value of the kind, without its surrounding white
// space, and returns its canonical form; ok is false when it is
// malformed, and err is then the parser's error, if any: for a KindString
// value holding a character hidden refuses, the hiddenChar, its offset
// in the trimmed value. (Every other kind's syntax refuses those
// characters already: see Kind.)
func (a *Annotation) plain(raw string) (c string, ok bool, err error) {
	v := strings.TrimSpace(raw)
	switch a.Kind {
	case KindBool:
		return v, v == "true" || v == "false", nil
	case KindInt:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", false, err
		}
		if (a.Min != 0 || a.Max != 0) && (n < a.Min || n > a.Max) {
			return "", false, nil
		}
		return strconv.FormatInt(n, 10), true, nil
	case KindDuration:
		d, err := time.ParseDuration(v)
		if err != nil {
			return "", false, err
		}
		return d.String(), d >= 0, nil
	case KindEnum:
		return v, slices.Contains(a.Values, v), nil
	case KindIP:
		ip, err := netip.ParseAddr(v)
		if err != nil {
			return "", false, err
		}
		return ip.String(), ip.Zone() == "", nil
	case KindCIDRList:
		ps, err := parseCIDRList(v)
		if err != nil {
			return "", false, err
		}
		return cidr.Join(ps), true, nil
	}
	if h, found := hidden(v, false); found {
		return "", false, h
	}
	return v, v != "", nil
}

// parseCIDRList parses a comma-separated list into masked, sorted, unique
// prefixes.
func parseCIDRList(v string) ([]netip.Prefix, error) {
	if strings.TrimSpace(v) == "" {
		return nil, errors.New("empty list")
	}
	parts := strings.Split(v, ",")
	ps := make([]netip.Prefix, 0, len(parts))
	for i, s := range parts {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		if p.Addr().Zone() != "" {
			return nil, fmt.Errorf("item %d: %q has a zone", i, cut(s))
		}
		ps = append(ps, p.Masked())
	}
	slices.SortFunc(ps, cidr.Compare)
	return slices.Compact(ps), nil
}

// quoteList quotes vs, joined by ", ". With a budget of 0 or more, each
// value is cut (clip.Quoted) and the values listed stop before the list
// passes budget bytes (at least one is listed), followed by ", … (N
// values)"; a negative budget lists every value as it is.
func quoteList(vs []string, budget int) string {
	var b strings.Builder
	for i, v := range vs {
		if budget < 0 {
			b.WriteString(strconv.Quote(v))
		} else {
			q := strconv.Quote(cut(v))
			if i > 0 && b.Len()+len(q) > budget {
				fmt.Fprintf(&b, "… (%d values)", len(vs))
				break
			}
			b.WriteString(q)
		}
		if i < len(vs)-1 {
			b.WriteString(", ")
		}
	}
	return b.String()
}
