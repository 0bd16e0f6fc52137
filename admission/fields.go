package admission

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// serviceVariables are the variables every policy has: whether the old
// Service was in scope, its namespace/name, its IP families, and its
// annotations (old and new).
//
// oldInScope is true on an UPDATE of a Service that already was of type
// LoadBalancer without a class. Only then is a value the same as the old
// Service's let through: a Service made before the policy, with a value
// the Reconciler refuses, can still be edited and have its finalizer
// removed, while a Service that becomes a LoadBalancer Service is checked
// as a new one is.
func serviceVariables() []admissionregistrationv1.Variable {
	return []admissionregistrationv1.Variable{
		{Name: "oldInScope", Expression: "request.operation == 'UPDATE' && oldObject.spec.?type.orValue('') == 'LoadBalancer' && !has(oldObject.spec.loadBalancerClass)"},
		{Name: "service", Expression: "object.metadata.?namespace.orValue('') + '/' + object.metadata.?name.orValue('')"},
		// serviceFamilies: spec.ipFamilies, or [IPv4] when empty.
		{Name: "families", Expression: "[object.spec.?ipFamilies.orValue([])].map(f, size(f) == 0 ? ['IPv4'] : f)[0]"},
		{Name: "annotations", Expression: "object.metadata.?annotations.orValue({})"},
		{Name: "oldAnnotations", Expression: "variables.oldInScope ? oldObject.metadata.?annotations.orValue({}) : {}"},
	}
}

// unchanged returns CEL that is true when the old Service was in scope and
// each field (a format of the Service's variable, %[1]s) is the same in
// both, and so is each of the pairs of variables, old first.
func unchanged(fields []string, variables ...string) string {
	eq := []string{"variables.oldInScope"}
	for _, f := range fields {
		eq = append(eq, fmt.Sprintf(f, "oldObject")+" == "+fmt.Sprintf(f, "object"))
	}
	for i := 0; i+1 < len(variables); i += 2 {
		eq = append(eq, variables[i]+" == "+variables[i+1])
	}
	return "(" + strings.Join(eq, " && ") + ")"
}

// ipFamiliesOf is the spec.ipFamilies of a Service, for unchanged.
const ipFamiliesOf = "%[1]s.spec.?ipFamilies.orValue([])"

// onService returns CEL for the message "service <namespace>/<name>:
// <detail>", detail being CEL; invalid adds the "invalid service: " of
// loadbalancer.ErrInvalidService.
func onService(invalid bool, detail string) string {
	prefix := "'service '"
	if invalid {
		prefix = "'invalid service: service '"
	}
	if rest, ok := strings.CutPrefix(detail, "'"); ok { // a literal first: one literal
		return prefix + " + variables.service + ': " + rest
	}
	return prefix + " + variables.service + ': ' + " + detail
}

// unsupported returns CEL for the message of a loadbalancer.UnsupportedError
// for feature, its Detail being onService(detail).
func unsupported(feature, detail string) string {
	return onService(false, detail) + " + " + lit(unsupportedTail(feature))
}

// unsupportedTail ends every UnsupportedError message: the error's own
// sentence with an empty Detail.
func unsupportedTail(feature string) string {
	return (&loadbalancer.UnsupportedError{Feature: feature}).Error()
}

// fieldCheck is one check of the Service's spec with the variables it
// reads. Its validation's expression passes when the Service does not ask
// for what is checked or did already (unchanged), and its message
// expression is the Reconciler's, or the empty string when there is
// nothing to say (the apiserver evaluates every message expression on
// every request).
type fieldCheck struct {
	variables  []admissionregistrationv1.Variable
	validation admissionregistrationv1.Validation
}

// dualStack is specBuilder.families: two IP families need DualStack.
func dualStack() fieldCheck {
	return fieldCheck{validation: admissionregistrationv1.Validation{
		Expression:        "size(variables.families) != 2 ||\n" + unchanged([]string{ipFamiliesOf}),
		MessageExpression: "size(variables.families) != 2 ? '' :\n" + unsupported("DualStack", "'spec.ipFamilies [' + variables.families.join(' ') + ']'"),
		Message:           "spec.ipFamilies has two families" + unsupportedTail("DualStack"),
	}}
}

// featureField is the check of a feature a Service asks for with one
// field (a format of the Service's variable, %[1]s): passes is CEL (a
// format of the field's value, %s) that is true when the Service does not
// ask for it; detail names the field and value for the message.
func featureField(feature, field, passes, detail string) fieldCheck {
	ok := fmt.Sprintf(passes, fmt.Sprintf(field, "object"))
	return fieldCheck{validation: admissionregistrationv1.Validation{
		Expression:        ok + " ||\n" + unchanged([]string{field}),
		MessageExpression: ok + " ? '' :\n" + unsupported(feature, lit(detail)),
		Message:           detail + unsupportedTail(feature),
	}}
}

// nodePortless is specBuilder.listeners: allocateLoadBalancerNodePorts
// false needs NodePortless.
func nodePortless() fieldCheck {
	return featureField("NodePortless", "%[1]s.spec.?allocateLoadBalancerNodePorts.orValue(true)", "%s", "spec.allocateLoadBalancerNodePorts=false")
}

// protocolOf is a port's protocol, TCP when unset (as Desired reads it).
const protocolOf = "%s.?protocol.orValue('TCP')"

// portKey is a port's identity, "port/protocol", unique in a Service.
func portKey(p string) string {
	return fmt.Sprintf("string(%s.?port.orValue(0)) + '/' + %s", p, fmt.Sprintf(protocolOf, p))
}

// protocols is specBuilder.protocol: a UDP or SCTP port needs UDP or
// SCTP. The ports refused are compared by key with the old Service's:
// one it had is let through. The message names the first one refused, as
// the first of the Reconciler's messages does (it names them all). Every
// step is linear in the ports but "in" over the refused ones (usually
// none) when they are not the old ones in the same order.
func protocols(caps loadbalancer.Capabilities) (fieldCheck, bool) {
	var refused []string
	if !caps.UDP {
		refused = append(refused, lit(string(v1.ProtocolUDP)))
	}
	if !caps.SCTP {
		refused = append(refused, lit(string(v1.ProtocolSCTP)))
	}
	if len(refused) == 0 {
		return fieldCheck{}, false
	}
	of := func(obj string) string {
		return fmt.Sprintf("%s.spec.?ports.orValue([]).filter(p, %s in [%s]).map(p, %s)", obj, fmt.Sprintf(protocolOf, "p"), strings.Join(refused, ", "), portKey("p"))
	}
	detail := "'spec.ports[' + string(object.spec.ports.map(p, " + portKey("p") + ").indexOf(k)) + '].protocol ' + k.split('/')[1] + ': ' + k.split('/')[1] + ' is not supported by this provider (Capabilities.' + k.split('/')[1] + ' is false)'"
	return fieldCheck{
		variables: []admissionregistrationv1.Variable{
			{Name: "refusedPorts", Expression: of("object")},
			{Name: "oldRefusedPorts", Expression: "variables.oldInScope ? " + of("oldObject") + " : []"},
			{Name: "refusedPortsKept", Expression: "variables.refusedPorts == variables.oldRefusedPorts || variables.refusedPorts.all(k, k in variables.oldRefusedPorts)"},
		},
		validation: admissionregistrationv1.Validation{
			Expression: "variables.refusedPortsKept",
			MessageExpression: "variables.refusedPortsKept ? '' :\n" +
				let("k", "variables.refusedPorts.filter(k, !(k in variables.oldRefusedPorts))[0]", onService(false, detail)),
			Message: "a port's protocol is not supported by this provider (Capabilities.UDP or Capabilities.SCTP is false)",
		},
	}, true
}

// mixedProtocols is specBuilder.listeners: ports of more than one
// protocol need MixedProtocols. The protocols are listed sorted, as
// joinProtocols does.
func mixedProtocols() fieldCheck {
	of := func(obj string) string {
		return fmt.Sprintf("['SCTP', 'TCP', 'UDP'].filter(x, %s.spec.?ports.orValue([]).exists(p, %s == x))", obj, fmt.Sprintf(protocolOf, "p"))
	}
	return fieldCheck{
		variables: []admissionregistrationv1.Variable{
			{Name: "protocols", Expression: of("object")},
			{Name: "oldProtocols", Expression: "variables.oldInScope ? " + of("oldObject") + " : []"},
		},
		validation: admissionregistrationv1.Validation{
			Expression:        "size(variables.protocols) < 2 || variables.oldProtocols == variables.protocols",
			MessageExpression: "size(variables.protocols) < 2 ? '' :\n" + unsupported("MixedProtocols", "'spec.ports mixes ' + variables.protocols.join(' and ')"),
			Message:           "spec.ports mixes protocols" + unsupportedTail("MixedProtocols"),
		},
	}
}

// maxSourceRanges is the most source ranges whose sorted list a message
// gives; over it, the static message. CEL before Kubernetes 1.34 has no
// sort, and a sort by rank needs the positions (sourceRangePositions).
const maxSourceRanges = 64

// sourceRangePositions is the list 0…maxSourceRanges-1.
func sourceRangePositions() string {
	p := make([]string, maxSourceRanges)
	for i := range p {
		p[i] = fmt.Sprint(i)
	}
	return "[" + strings.Join(p, ", ") + "]"
}

// sourceRangesOf is servicehelpers.GetLoadBalancerSourceRanges's input for
// obj, whose annotations are ann: spec.loadBalancerSourceRanges, else the
// annotation split at commas, each entry trimmed (utilnet.ParseIPNets);
// empty when neither is set (allow-all).
func sourceRangesOf(obj, ann string) string {
	return fmt.Sprintf("(size(%s.spec.?loadBalancerSourceRanges.orValue([])) > 0 ? %s.spec.loadBalancerSourceRanges.map(r, r.trim()) :\n%s)",
		obj, obj, let("a", ann+"[?"+lit(v1.AnnotationLoadBalancerSourceRangesKey)+"].orValue('').trim()", "a == '' ? [] : a.split(',').map(r, r.trim())"))
}

// sourceRanges is specBuilder.sourceRanges: anything but allow-all needs
// SourceRanges. The apiserver has parsed every range (Service validation:
// the same parser as servicehelpers, or a stricter one), so a range's
// length and family are read from its text: /0 (or /00…) and whether it
// has a colon (an IPv6 one, IPv4-mapped included). The message lists the
// ranges as Desired does: masked, sorted (IPv4 first, by address, then
// length), without duplicates, by a fixed-width sort key per range.
func sourceRanges() fieldCheck {
	r := "variables.sourceRanges"
	restricts := fmt.Sprintf("size(%s) > 0 && !(%s.all(r, r.matches('/0+$')) &&\n  (!('IPv4' in variables.families) || %s.exists(r, !r.contains(':'))) &&\n  (!('IPv6' in variables.families) || %s.exists(r, r.contains(':'))))", r, r, r, r)
	key := "isCIDR(e) ? " + let("c", "cidr(e).masked()",
		"(c.ip().family() == 4 ? '4' + string(c.ip()).split('.').map(o, "+pad3("o")+").join('') : '6' + "+expand6("string(c.ip())")+") +\n    "+
			pad3("string(c.prefixLength())")+" + ' ' + string(c)") + " :\n  '9 ' + e"
	sorted := let("k", r+".map(e,\n  "+key+")",
		let("u", sourceRangePositions()+".filter(i, i < size(k) && k.indexOf(k[i]) == i).map(i, k[i])",
			let("n", "u.map(x, size(u.filter(y, y < x)))",
				sourceRangePositions()+".filter(i, i < size(u)).map(i, u[n.indexOf(i)].split(' ')[1]).join(',')")))
	return fieldCheck{
		variables: []admissionregistrationv1.Variable{
			{Name: "sourceRanges", Expression: sourceRangesOf("object", "variables.annotations")},
			{Name: "oldSourceRanges", Expression: "variables.oldInScope ? " + sourceRangesOf("oldObject", "variables.oldAnnotations") + " : []"},
			{Name: "restrictsClients", Expression: restricts},
			{Name: "sourceRangesText", Expression: sorted},
		},
		validation: admissionregistrationv1.Validation{
			Expression: "!variables.restrictsClients ||\n" + unchanged([]string{ipFamiliesOf}, "variables.oldSourceRanges", "variables.sourceRanges"),
			MessageExpression: fmt.Sprintf("!variables.restrictsClients || size(variables.sourceRanges) > %d ? '' :\n%s", maxSourceRanges,
				unsupported("SourceRanges", "'source ranges ' + variables.sourceRangesText")),
			Message: "spec.loadBalancerSourceRanges or the annotation " + v1.AnnotationLoadBalancerSourceRangesKey + " restricts clients" + unsupportedTail("SourceRanges"),
		},
	}
}

// clientIPAffinity is specBuilder.sessionAffinity: ClientIP needs
// ClientIPAffinity.
func clientIPAffinity() fieldCheck {
	return featureField("ClientIPAffinity", "%[1]s.spec.?sessionAffinity.orValue('None')", "%s != 'ClientIP'", "spec.sessionAffinity ClientIP")
}

// requestedIP is requestedIPs for spec.loadBalancerIP, whose value is
// quoted at position quotedAt of the quoted variable (the requested-IP
// annotation is not known here, see the package doc): an address
// netip.ParseAddr takes without zone, of one of the Service's families,
// and, without RequestedIP, none. Its text is netip's canonical form of
// the address unmapped: an IPv4-mapped one is its IPv4 address, dotted
// (from the 32 low bits of its hex groups when it has no dotted part).
func requestedIP(caps loadbalancer.Capabilities, quotedAt int) fieldCheck {
	ip := "variables.requestedIP"
	mapped4 := fmt.Sprintf("%s.contains('.') ? %s.substring(%s.lastIndexOf(':') + 1) :\n  %s", ip, ip, ip,
		let("x", expand6(ip), let("d", hexDigits, "[24, 26, 28, 30].map(i, string(d[x.charAt(i)] * 16 + d[x.charAt(i + 1)])).join('.')")))
	vars := []admissionregistrationv1.Variable{
		{Name: "requestedIP", Expression: "object.spec.?loadBalancerIP.orValue('')"},
		{Name: "requestedIPValid", Expression: ipSyntax(ip)},
		{Name: "requestedIPFamily", Expression: fmt.Sprintf("!isIP(%s) || ip(%s).family() == 4 ? 'IPv4' : 'IPv6'", ip, ip)},
		{Name: "requestedIPText", Expression: fmt.Sprintf("isIP(%s) ? string(ip(%s)) :\n%s", ip, ip, mapped4)},
	}
	fine := "variables.requestedIPValid && variables.requestedIPFamily in variables.families"
	last := "''"
	if !caps.RequestedIP {
		fine = "false"
		last = onService(false, "'requested IP ' + variables.requestedIPText") + " + " + lit(unsupportedTail("RequestedIP"))
	}
	return fieldCheck{
		variables: vars,
		validation: admissionregistrationv1.Validation{
			Expression: fmt.Sprintf("%s == '' ||\n%s ||\n%s", ip, unchanged([]string{"%[1]s.spec.?loadBalancerIP.orValue('')", ipFamiliesOf}), fine),
			MessageExpression: fmt.Sprintf("%s == '' ? '' :\n!variables.requestedIPValid ? %s :\n!(variables.requestedIPFamily in variables.families) ? %s :\n%s",
				ip,
				onService(true, fmt.Sprintf("'spec.loadBalancerIP ' + variables.quoted[%d] + ': expected an IPv4 or IPv6 address'", quotedAt)),
				onService(true, "'requested IP ' + variables.requestedIPText + ' is ' + variables.requestedIPFamily + ': expected a family of spec.ipFamilies [' + variables.families.join(' ') + ']'"),
				last),
			Message: "spec.loadBalancerIP is not an address of the Service's IP families the provider can request",
		},
	}
}

// fieldChecks returns the checks of the Service's spec for caps, in the
// order of Desired's steps, but for the annotations (after dualStack);
// declared is the number of declared annotations (see quotedVariable).
func fieldChecks(caps loadbalancer.Capabilities, declared int) (before, after []fieldCheck) {
	if !caps.DualStack {
		before = append(before, dualStack())
	}
	if !caps.NodePortless {
		after = append(after, nodePortless())
	}
	if c, ok := protocols(caps); ok {
		after = append(after, c)
	}
	if !caps.MixedProtocols {
		after = append(after, mixedProtocols())
	}
	if !caps.SourceRanges {
		after = append(after, sourceRanges())
	}
	if !caps.ClientIPAffinity {
		after = append(after, clientIPAffinity())
	}
	after = append(after, requestedIP(caps, declared))
	return before, after
}
