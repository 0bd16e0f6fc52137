package admission

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/ccmkit/ccmkit/annotation"
)

// This file holds the checks of a PerPort annotation (annotation.Annotation
// PerPort): its syntax and values, as annotation's parsePorts checks them,
// with its messages, and that each PORT names a port of the Service, as
// loadbalancer.Desired checks it.

// maxPortEntries bounds the entries of a PerPort value the policy looks at:
// the first ones, for their syntax and values, and all of them, for a PORT
// listed twice or not a port of the Service, only when the value has no
// more. Comparing entries with entries, or with spec.ports, costs the
// product of their numbers (CEL in Kubernetes 1.30 has neither sets nor
// sort), and the bound keeps it within the apiserver's budget for any
// Service; see the package doc for what it lets through.
const maxPortEntries = 64

// maxPortList bounds the list of the Service's ports in the unknown
// port's message, in bytes: the apiserver drops a message of more than
// 5 KiB (celconfig.MaxEvaluatedMessageExpressionSizeBytes) for the
// validation's static one, and a longer list is cut as internal/clip.Value
// cuts ("… (N bytes)"), so that the rest of the message (at most some 500
// bytes: the annotation's name, the PORT) stays. The list is ASCII (names
// are DNS-1123 labels), so CEL's substring cuts it in bytes.
const maxPortList = 4 << 10

// portLabel is a DNS-1123 label (validation.IsDNS1123Label with its
// length, checked apart). Every port number is one, so a PORT is valid
// when it is a label: a number's range only tells a number from a name.
const portLabel = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`

// portNumberSyntax is a port number's syntax (1 to 99999; the range is
// checked apart).
const portNumberSyntax = `^[1-9][0-9]{0,4}$`

// perPortNames are the names of the variables of the PerPort annotation
// at position i of the declared ones.
type perPortNames struct{ entries, cut, problem string }

// perPortNamesOf returns the variables' names for position i.
func perPortNamesOf(i int) perPortNames {
	p := fmt.Sprintf("perPort%d", i)
	return perPortNames{entries: p + "Entries", cut: p + "Cut", problem: p + "Problem"}
}

// portVariables are the variables every policy with a PerPort annotation
// has: the names and numbers of the Service's ports, which a PORT may be
// (an unnamed port's name is "", which no PORT is), and their list for
// the message, old and new.
func portVariables() []admissionregistrationv1.Variable {
	ports := "object.spec.?ports.orValue([])"
	return []admissionregistrationv1.Variable{
		{Name: "portTexts", Expression: fmt.Sprintf("%s.map(p, p.?name.orValue('')) + %s.map(p, string(p.?port.orValue(0)))", ports, ports)},
		{Name: "portList", Expression: portListOf("object")},
		{Name: "oldPortList", Expression: "variables.oldInScope ? " + portListOf("oldObject") + " : ''"},
	}
}

// portListOf is the list of obj's ports in the unknown port's message:
// each "name/port", or "port" when unnamed, joined by ", ", in the order
// of spec.ports.
func portListOf(obj string) string {
	return fmt.Sprintf("%s.spec.?ports.orValue([]).map(p, %s).join(', ')", obj,
		let("n", "p.?name.orValue('')", "(n == '' ? '' : n + '/') + string(p.?port.orValue(0))"))
}

// perPortVariables are the variables of the PerPort annotation a at
// position i: its first maxPortEntries entries, trimmed (entries); whether
// it has more (cut); and its problem (problem): [] when it is fine, else
// the end of annotation.Error's Expected after a.Expected(), the entry at
// fault, alone in a list ([""] for a blank value, and an absent one,
// which the validations leave alone).
func perPortVariables(a *annotation.Annotation, i int) []admissionregistrationv1.Variable {
	names := perPortNamesOf(i)
	value := fmt.Sprintf("variables.annotations[?%s].orValue('')", lit(a.Name))
	first := let("v", value, let("parts", fmt.Sprintf("v.split(',', %d)", maxPortEntries+1),
		fmt.Sprintf("(size(parts) <= %d ? parts : v.substring(0, size(v) - size(parts[%d]) - 1).split(','))", maxPortEntries, maxPortEntries))) +
		".map(e, e.trim())"
	return []admissionregistrationv1.Variable{
		{Name: names.entries, Expression: first},
		{Name: names.cut, Expression: fmt.Sprintf("size(%s.split(',', %d)) > %d", value, maxPortEntries+1, maxPortEntries)},
		{Name: names.problem, Expression: let("v", value, "v.trim() == '' ? [''] :\n"+
			let("bad", fmt.Sprintf("variables.%s.filter(e, !(%s))", names.entries, entryValid(a, "e")),
				fmt.Sprintf("size(bad) > 0 ? [%s] :\nvariables.%s ? [] :\n%s",
					let("e", "bad[0]", entryProblem(a, fmt.Sprintf("string(variables.%s.indexOf(e) + 1)", names.entries))),
					names.cut, repeatedPort("variables."+names.entries))))},
	}
}

// entryPort and entryValue return CEL for the PORT and the VALUE of the
// entry e, which holds "=": cut at the first "=" (strings.Cut), each
// without surrounding white space.
func entryPort(e string) string { return fmt.Sprintf("%s.substring(0, %s.indexOf('=')).trim()", e, e) }

// entryValue: see entryPort.
func entryValue(e string) string {
	return fmt.Sprintf("%s.substring(%s.indexOf('=') + 1).trim()", e, e)
}

// portSyntax returns CEL that is true when p is a PORT: a port number or
// name (see portLabel).
func portSyntax(p string) string {
	return fmt.Sprintf("size(%s) <= 63 && %s.matches(%s)", p, p, rx(portLabel))
}

// entryValid returns CEL that is true when the entry e, trimmed, is one
// annotation's parsePorts takes: not empty, with "=", a PORT and a VALUE
// valid for a's kind.
func entryValid(a *annotation.Annotation, e string) string {
	return fmt.Sprintf("%s != '' && %s.contains('=') &&\n  %s &&\n  %s", e, e,
		letBool("p", entryPort(e), portSyntax("p")), letBool("x", entryValue(e), valid(a, "x")))
}

// entryProblem returns CEL for the problem of the entry e, one entryValid
// refuses, the n-th (CEL for its number as a string): the words of
// annotation's parsePorts, which checks in this order, and for a
// KindString VALUE holding a hidden character says so as it does.
func entryProblem(a *annotation.Annotation, n string) string {
	at := "': entry ' + " + n
	value := at + " + ' has VALUE ' + " + quote(entryValue("e"))
	if a.Kind == annotation.KindString {
		value += fmt.Sprintf(" + (%s.matches(%s) ? ', holding a control or invisible character' : '')", entryValue("e"), rx(hiddenChars))
	}
	return fmt.Sprintf("e == '' ? %s + ' is empty' :\n!e.contains('=') ? %s + ' ' + %s + ' has no \"=\"' :\n%s",
		at, at, quote("e"), let("p", entryPort("e"),
			fmt.Sprintf("!(%s) ? %s + ' has PORT ' + %s :\n%s", portSyntax("p"), at, quote("p"), value)))
}

// repeatedPort returns CEL for the problem of the entries (valid ones) when
// a PORT is listed twice, as parsePorts words it: the first PORT listed
// again, its first and last entries; [] when none is. A PORT that is
// valid needs neither escape nor cut.
func repeatedPort(entries string) string {
	return let("ps", entries+".map(e, "+entryPort("e")+")",
		let("d", "ps.filter(p, ps.indexOf(p) != ps.lastIndexOf(p))",
			`size(d) == 0 ? [] : [': entries ' + string(ps.indexOf(d[0]) + 1) + ' and ' + string(ps.lastIndexOf(d[0]) + 1) + ' have PORT "' + d[0] + '"']`))
}

// perPortValidation is annotationValidation for the PerPort annotation a,
// the i-th of the quoted variable: its message is annotation.Error's,
// Expected followed by the entry at fault.
func perPortValidation(a *annotation.Annotation, i int) admissionregistrationv1.Validation {
	name, problem := lit(a.Name), "variables."+perPortNamesOf(i).problem
	head := fmt.Sprintf("annotation %q: invalid value ", a.Name)
	tail := ": expected " + a.Expected()
	return admissionregistrationv1.Validation{
		Expression: fmt.Sprintf("!(%s in variables.annotations) ||\n(%s in variables.oldAnnotations && variables.oldAnnotations[%s] == variables.annotations[%s]) ||\nsize(%s) == 0",
			name, name, name, name, problem),
		MessageExpression: fmt.Sprintf("!(%s in variables.annotations) || size(%s) == 0 ? '' :\n%s + variables.quoted[%d] + %s + %s[0]", name, problem, lit(head), i, lit(tail), problem),
		Message:           fmt.Sprintf("annotation %q: invalid value%s", a.Name, tail),
		Reason:            reasonInvalid(),
	}
}

// unknownPortValidation is loadbalancer.Desired's check that each PORT of
// the PerPort annotation a, at position i, is a port of the Service: one
// of spec.ports has it as its name, or as its number. It is checked when
// the value is valid and has at most maxPortEntries entries, unless the
// value and the Service's ports are the old Service's. The message names
// the first PORT that is none, in canonical order (numbers ascending, then
// names), and lists the Service's ports (cut at maxPortList bytes).
func unknownPortValidation(a *annotation.Annotation, i int) admissionregistrationv1.Validation {
	name, v := lit(a.Name), perPortNamesOf(i)
	known := fmt.Sprintf("variables.%s.all(e, %s in variables.portTexts)", v.entries, entryPort("e"))
	skip := fmt.Sprintf("!(%s in variables.annotations) || size(variables.%s) > 0 || variables.%s", name, v.problem, v.cut)
	first := let("u", fmt.Sprintf("variables.%s.map(e, %s).filter(p, !(p in variables.portTexts))", v.entries, entryPort("e")),
		let("ns", fmt.Sprintf("u.filter(p, p.matches(%s) && int(p) <= 65535)", rx(portNumberSyntax)),
			"size(ns) > 0 ? string(ns.map(p, int(p)).min()) : u.min()"))
	return admissionregistrationv1.Validation{
		Expression: fmt.Sprintf("%s ||\n(%s in variables.oldAnnotations && variables.oldAnnotations[%s] == variables.annotations[%s] && variables.oldPortList == variables.portList) ||\n%s",
			skip, name, name, name, known),
		MessageExpression: fmt.Sprintf("%s || %s ? '' :\n%s + %s + %s + %s + ')'", skip, known,
			lit(fmt.Sprintf("annotation %q: port \"", a.Name)), first, lit(`" is not a port of the service: expected a port name or number of spec.ports (`),
			let("l", "variables.portList", fmt.Sprintf("size(l) <= %d ? l : l.substring(0, %d) + '… (' + string(size(l)) + ' bytes)'", maxPortList, maxPortList))),
		Message: fmt.Sprintf("annotation %q: a PORT is not a port of the service: expected a port name or number of spec.ports", a.Name),
		Reason:  reasonInvalid(),
	}
}
