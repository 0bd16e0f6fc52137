package admission

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/ccmkit/ccmkit/internal/clip"
)

// This file holds the CEL pieces the validations share. Each function
// returns CEL source; an argument named like a CEL expression is CEL
// source too, evaluated once (bound with let). Everything here is in the
// CEL environment of Kubernetes 1.30 (ValidatingAdmissionPolicy v1, the
// ip/cidr libraries): nothing newer, so that the policy loads on every
// Kubernetes that has admissionregistration.k8s.io/v1 policies.

// lit returns s as a CEL string literal. strconv.Quote's escapes (\n,
// \", \xNN below 0x20, \uNNNN) are CEL's, for valid UTF-8.
func lit(s string) string { return strconv.Quote(s) }

// rx returns the regular expression re as a CEL raw string literal, so
// that its backslashes stay single. re is a constant of this package.
func rx(re string) string {
	if strings.ContainsAny(re, "'\n") {
		panic("admission: regular expression with a quote or a newline: " + re)
	}
	return "r'" + re + "'"
}

// let binds the value of expr to name in body: CEL in Kubernetes has no
// cel.bind, and a comprehension over a one-element list evaluates expr
// once.
func let(name, expr, body string) string {
	return fmt.Sprintf("[%s].map(%s, %s)[0]", expr, name, body)
}

// letBool is let for a boolean body, without the [0].
func letBool(name, expr, body string) string {
	return fmt.Sprintf("[%s].all(%s, %s)", expr, name, body)
}

// maxQuoted is the number of bytes of a user value the Reconciler quotes
// in a message before cutting it: the bound annotation.Error.Error and the
// loadbalancer package use.
const maxQuoted = clip.MaxQuoted

// quote returns CEL for the message form of the string s as the
// Reconciler quotes a value: cut to maxQuoted bytes at a rune boundary
// with "… (N bytes)" (internal/clip.Value), then in Go's %q
// (strconv.Quote): each character that %q escapes (see escapesVariable)
// replaced by its escape. It reads the variable escapes.
func quote(s string) string {
	return fmt.Sprintf("'\"' + %s.split('').map(r, variables.escapes[?r].orValue(r)).join('') + '\"'", cut(s))
}

// escapesVariable is the variable "escapes": a map from each character
// strconv.Quote escapes to its escape, for quote. Those are '"', '\\'
// and the characters that are not printable (strconv.IsPrint) among the
// assigned ones of the categories Cc (controls), Cf (format characters
// such as U+200B, U+FEFF) and Z (spaces but U+0020, line and paragraph
// separators), per the Unicode tables of the Go that generates the
// policy. Unassigned and private-use code points, which %q escapes too,
// are left out (there are hundreds of thousands): the policy quotes them
// as they are, see the package doc. CEL's strings.quote is not used: it
// escapes fewer characters.
func escapesVariable() admissionregistrationv1.Variable {
	var entries []string
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r == '"' || r == '\\' || (!strconv.IsPrint(r) && unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zs, unicode.Zl, unicode.Zp)) {
			q := strconv.Quote(string(r))
			entries = append(entries, lit(string(r))+": "+lit(q[1:len(q)-1]))
		}
	}
	var b strings.Builder
	b.WriteString("{")
	for i, e := range entries {
		switch {
		case i == 0:
		case i%8 == 0:
			b.WriteString(",\n ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(e)
	}
	b.WriteString("}")
	return admissionregistrationv1.Variable{Name: "escapes", Expression: b.String()}
}

// cut returns CEL for clip.Value(s, maxQuoted): s when it has at most
// maxQuoted bytes, else its longest prefix of whole runes within
// maxQuoted bytes and "… (N bytes)". The prefix is found by binary lifting
// over the rune count k of the first maxQuoted runes w: each step adds
// 256, 128, …, 1 to k while the prefix stays within the bytes.
func cut(s string) string {
	steps := "[0]"
	for p := maxQuoted; p >= 1; p /= 2 {
		steps += fmt.Sprintf("\n    .map(k, k + %d <= size(w) && size(bytes(w.substring(0, k + %d))) <= %d ? k + %d : k)", p, p, maxQuoted, p)
	}
	prefix := let("w", fmt.Sprintf("s.substring(0, size(s) < %d ? size(s) : %d)", maxQuoted, maxQuoted), steps+".map(k, w.substring(0, k))[0]")
	return let("s", s, fmt.Sprintf("size(bytes(s)) <= %d ? s : %s + '… (' + string(size(bytes(s))) + ' bytes)'", maxQuoted, prefix))
}

// ipSyntax returns CEL that is true when the string v is an IPv4 or IPv6
// address netip.ParseAddr accepts without zone, which is what the
// Reconciler accepts (annotation.KindIP, spec.loadBalancerIP). The CEL
// ip library parses with netip.ParseAddr too but refuses IPv4-mapped IPv6
// addresses (::ffff:1.2.3.4), which Go accepts: a mapped address has
// "ffff" as its sixth group, always written so (four hex digits), and
// rewriting every "ffff" to "fffe" (after lower-casing, hex is
// case-insensitive) changes no address's validity and leaves none mapped.
// No address is longer than 45 characters
// (0000:0000:0000:0000:0000:ffff:255.255.255.255), which bounds the cost.
func ipSyntax(v string) string {
	return fmt.Sprintf("size(%s) <= 45 && isIP(%s)", v, unmapped(v))
}

// cidrSyntax is ipSyntax for a prefix (netip.ParsePrefix: no zone, no
// leading zeros in the length, at most 32 or 128 bits; host bits are
// allowed), at most 49 characters.
func cidrSyntax(v string) string {
	return fmt.Sprintf("size(%s) <= 49 && isCIDR(%s)", v, unmapped(v))
}

// unmapped returns CEL for v with no IPv4-mapped address (see ipSyntax).
func unmapped(v string) string {
	return fmt.Sprintf("%s.lowerAscii().replace('ffff', 'fffe')", v)
}

// expand6 returns CEL for the 32 lower-case hex digits of the IPv6 address
// a, written with hex groups only (no dotted IPv4 part), "::" expanded.
func expand6(a string) string {
	groups := func(h string) string {
		return fmt.Sprintf("(%s == '' ? [] : %s.split(':')).map(g, ('000' + g).substring(size(g) - 1)).join('')", h, h)
	}
	count := func(h string) string { return fmt.Sprintf("(%s == '' ? 0 : size(%s.split(':')))", h, h) }
	return let("a", a+".lowerAscii()", fmt.Sprintf("a.contains('::') ? %s : %s",
		let("h", "a.split('::')", groups("h[0]")+" + '"+strings.Repeat("0", 32)+"'.substring(0, 4 * (8 - "+count("h[0]")+" - "+count("h[1]")+")) + "+groups("h[1]")),
		groups("a")))
}

// pad3 returns CEL for the decimal string d left-padded with zeros to
// three digits.
func pad3(d string) string {
	return let("d", d, "('00' + d).substring(size(d) - 1)")
}

// hexDigits maps a hex digit to its value.
const hexDigits = "{'0': 0, '1': 1, '2': 2, '3': 3, '4': 4, '5': 5, '6': 6, '7': 7, '8': 8, '9': 9, 'a': 10, 'b': 11, 'c': 12, 'd': 13, 'e': 14, 'f': 15}"
