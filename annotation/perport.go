package annotation

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Ports returns a PerPort annotation's values by port (see
// Annotation.PerPort): PORT, as written without white space ("443",
// "https"), to its canonical VALUE, and set true, when the annotation is
// present; nil, false and nil when it is absent. A port the map does not
// list, and every port when the annotation is absent, has the Default
// (a.Default, canonical; "" when there is none): callers use a.Default for
// unlisted ports. Which PORT names which of a Service's ports (its name,
// or its number in base 10) is the caller's to check: this package does
// not see the Service.
//
// A malformed value is an *Error (errors.Is(err, ErrInvalid)) naming the
// entry at fault, with a nil map and set true. Calling Ports on an
// annotation that is not PerPort is an error, not a panic. The map is new,
// the caller's.
func (a *Annotation) Ports(annotations map[string]string) (map[string]string, bool, error) {
	if !a.PerPort {
		return nil, false, fmt.Errorf("annotation %q is declared as %s, not %s per port", a.Name, a.Kind, a.Kind)
	}
	raw, ok := annotations[a.Name]
	if !ok {
		return nil, false, nil
	}
	entries, err := a.parsePorts(raw)
	if err != nil {
		return nil, true, err
	}
	m := make(map[string]string, len(entries))
	for _, e := range entries {
		m[e.port] = e.value
	}
	return m, true, nil
}

// portEntry is one PORT=VALUE entry of a PerPort value, canonical.
type portEntry struct {
	port   string
	number int // the port's number; 0 for a name
	value  string
}

// parsePorts parses a PerPort value into its entries, in the order
// written. It checks every entry's syntax and value first, in order, then
// that no PORT is listed twice, and reports the first problem: an *Error
// whose Expected is Expected() and, after ": ", the entry at fault.
func (a *Annotation) parsePorts(raw string) ([]portEntry, error) {
	fail := func(err error, format string, args ...any) ([]portEntry, error) {
		exp := a.Expected()
		if format != "" {
			exp += ": " + fmt.Sprintf(format, args...)
		}
		return nil, &Error{Name: a.Name, Value: raw, Expected: exp, Err: err}
	}
	if strings.TrimSpace(raw) == "" {
		return fail(nil, "")
	}
	parts := strings.Split(raw, ",")
	entries := make([]portEntry, 0, len(parts))
	for i, part := range parts {
		n := i + 1
		e := strings.TrimSpace(part)
		port, value, found := strings.Cut(e, "=")
		port = strings.TrimSpace(port)
		number, isNumber := portNumber(port)
		switch {
		case e == "":
			return fail(nil, "entry %d is empty", n)
		case !found:
			return fail(nil, `entry %d %q has no "="`, n, cut(e))
		case !isNumber && len(validation.IsDNS1123Label(port)) > 0:
			return fail(nil, "entry %d has PORT %q", n, cut(port))
		}
		c, ok, err := a.plain(value)
		if h := (hiddenChar{}); errors.As(err, &h) {
			return fail(err, "entry %d has VALUE %q, holding a control or invisible character", n, cut(strings.TrimSpace(value)))
		}
		if !ok {
			return fail(err, "entry %d has VALUE %q", n, cut(strings.TrimSpace(value)))
		}
		entries = append(entries, portEntry{port: port, number: number, value: c})
	}
	if first, last, dup := repeatedPort(entries); dup {
		return fail(nil, "entries %d and %d have PORT %q", first+1, last+1, entries[first].port)
	}
	return entries, nil
}

// repeatedPort returns the first entry whose PORT is listed again and
// the last entry that lists it.
func repeatedPort(entries []portEntry) (first, last int, dup bool) {
	lastOf := make(map[string]int, len(entries))
	for i, e := range entries {
		lastOf[e.port] = i
	}
	for i, e := range entries {
		if l := lastOf[e.port]; l != i {
			return i, l, true
		}
	}
	return 0, 0, false
}

// portNumber returns the number p writes and true when p is a port number:
// 1 to 65535 in base 10, without sign or leading zeros.
func portNumber(p string) (int, bool) {
	if p == "" || len(p) > 5 || p[0] == '0' {
		return 0, false
	}
	n := 0
	for _, c := range []byte(p) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 65535
}

// joinPorts returns the canonical form of entries: sorted, port numbers
// ascending first, then names in byte order, each PORT=VALUE, joined by
// ",".
func joinPorts(entries []portEntry) string {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(x, y portEntry) int {
		if (x.number == 0) != (y.number == 0) {
			return cmp.Compare(y.number, x.number) // a number before a name
		}
		return cmp.Or(cmp.Compare(x.number, y.number), strings.Compare(x.port, y.port))
	})
	var b strings.Builder
	for i, e := range sorted {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.port + "=" + e.value)
	}
	return b.String()
}

// example is a PerPort value of the annotation's kind, canonical, for
// Expected and the Markdown reference: port 443 and port "https" with two
// values of the kind ("443=true,https=false").
func (a *Annotation) example() string {
	x, y := "true", "false"
	switch a.Kind {
	case KindInt:
		x, y = "1", "2"
		if a.Min != 0 || a.Max != 0 {
			x, y = strconv.FormatInt(a.Min, 10), strconv.FormatInt(a.Max, 10)
		}
	case KindDuration:
		x, y = "30s", "1m30s"
	case KindEnum:
		x, y = a.Values[0], a.Values[len(a.Values)-1]
	case KindIP:
		x, y = "10.0.0.1", "2001:db8::1"
	case KindString:
		x, y = "a", "b"
	}
	return "443=" + x + ",https=" + y
}
