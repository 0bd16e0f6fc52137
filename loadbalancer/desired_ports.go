package loadbalancer

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/internal/clip"
)

// maxPortList bounds the list of a Service's ports quoted in the error
// for a per-port annotation naming a port the Service does not have; the
// admission policy cuts it at the same length.
const maxPortList = 4 << 10

// checkAppProtocolAnnotation returns an error naming field when a, if set,
// cannot say a port's application protocol: it is not per port, not of
// kind enum or string, or the provider declares no AppProtocols.
func checkAppProtocolAnnotation(field string, a *annotation.Annotation, caps Capabilities) error {
	switch {
	case a == nil:
		return nil
	case !a.PerPort || (a.Kind != annotation.KindEnum && a.Kind != annotation.KindString):
		return fmt.Errorf("%s %q is of kind %s (per port: %v): expected a per-port enum or string annotation", field, a.Name, a.Kind, a.PerPort)
	case len(caps.AppProtocols) == 0:
		return fmt.Errorf("%s %q is set, but Capabilities.AppProtocols is empty: expected the application protocols the load balancer serves", field, a.Name)
	}
	return nil
}

// perPort checks the PORTs of every declared per-port annotation present
// (perPortAnns, which settings collects)
// against spec.ports, and applies them to the listeners built from it:
// the values of the settings (annotation.PerPort with Setting) to each
// listener's Settings, the application protocol of appAnn and the health
// check of healthAnn. A PORT naming no port of the Service, or one port listed
// both by number and by name, is an error naming the annotation. A
// malformed value was already reported (settings validates every declared
// annotation).
//
// Its errors go where the settings' end (at), before those of the
// listeners: the admission policy checks the PORTs right after the
// annotations' values, and shows the first problem, as the first line of
// the Reconciler's Warning event does.
func (b *specBuilder) perPort(appAnn, healthAnn *annotation.Annotation, at int) {
	if len(b.perPortAnns) == 0 {
		return
	}
	n := len(b.errs)
	defer func() {
		mine := slices.Clone(b.errs[n:])
		b.errs = slices.Insert(b.errs[:n], at, mine...)
	}()
	for _, a := range b.perPortAnns { // every one's PORTs are checked; a setting's or appAnn's values applied
		values, _, err := a.Ports(b.svc.Annotations)
		if err != nil {
			continue // reported by settings
		}
		byPort, ok := b.portValues(a, values)
		if !ok {
			continue
		}
		for i := range b.spec.Listeners {
			l := &b.spec.Listeners[i]
			v, listed := byPort[ListenerKey{Protocol: l.Protocol, Port: l.Port}]
			switch {
			case a == appAnn:
				b.listenerAppProtocol(a, l, v, listed)
			case a == healthAnn:
				b.listenerHealthCheck(a, l, v, listed)
			case a.Setting && a.PerPort:
				if !listed {
					v = a.Default
				}
				if l.Settings == nil {
					l.Settings = map[string]string{}
				}
				l.Settings[a.Name] = v
			}
		}
	}
}

// portValues resolves the PORTs of a's values to the Service's ports, by
// (protocol, port) with the family left zero; ok is false after it
// recorded an error.
func (b *specBuilder) portValues(a *annotation.Annotation, values map[string]string) (map[ListenerKey]string, bool) {
	out := make(map[ListenerKey]string, len(values))
	by := map[ListenerKey]string{} // which PORT named each port
	for _, ref := range sortedPortRefs(values) {
		found := false
		for _, p := range b.svc.Spec.Ports { // a number names every port with it (TCP and UDP 53), a name one
			if (p.Name == "" || p.Name != ref) && strconv.Itoa(int(p.Port)) != ref {
				continue
			}
			found = true
			k := ListenerKey{Protocol: cmp.Or(p.Protocol, v1.ProtocolTCP), Port: p.Port}
			if prev, dup := by[k]; dup {
				b.fail(&portRefError{name: a.Name, port: ref, twice: prev, ports: portList(b.svc.Spec.Ports)})
				return nil, false
			}
			by[k], out[k] = ref, values[ref]
		}
		if !found {
			b.fail(&portRefError{name: a.Name, port: ref, ports: portList(b.svc.Spec.Ports)})
			return nil, false
		}
	}
	return out, true
}

// listenerAppProtocol sets l's application protocol from appAnn's value v
// for its port (listed), which must agree with spec.ports[].appProtocol
// when both are set and be one of Capabilities.AppProtocols.
func (b *specBuilder) listenerAppProtocol(a *annotation.Annotation, l *Listener, v string, listed bool) {
	if !listed {
		v = a.Default
	}
	if v == "" {
		return
	}
	if l.AppProtocol != "" && l.AppProtocol != v {
		b.invalid("port %d/%s: spec.ports[].appProtocol %q and annotation %q %q differ: expected one application protocol", l.Port, l.Protocol, cut(l.AppProtocol), a.Name, cut(v))
		return
	}
	if !slices.Contains(b.caps.AppProtocols, v) {
		b.unsupported("AppProtocols", "annotation %q: port %d/%s: application protocol %q (expected one of %q)", a.Name, l.Port, l.Protocol, cut(v), b.caps.AppProtocols)
		return
	}
	l.AppProtocol = v
}

// sortedPortRefs returns the PORTs of values in canonical order: numbers
// ascending, then names in byte order (annotation's canonical form, and
// the order the admission policy looks for the first unknown one in).
func sortedPortRefs(values map[string]string) []string {
	refs := make([]string, 0, len(values))
	for r := range values {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(a, b string) int {
		na, ea := strconv.Atoi(a)
		nb, eb := strconv.Atoi(b)
		switch {
		case ea == nil && eb == nil:
			return cmp.Compare(na, nb)
		case ea == nil:
			return -1
		case eb == nil:
			return 1
		}
		return strings.Compare(a, b)
	})
	return refs
}

// portList is the Service's ports for the unknown-port error: each
// "name/port", or "port" when unnamed, joined by ", ", in the order of
// spec.ports, cut at maxPortList bytes.
func portList(ports []v1.ServicePort) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = strconv.Itoa(int(p.Port))
		if p.Name != "" {
			parts[i] = p.Name + "/" + parts[i]
		}
	}
	return clip.Value(strings.Join(parts, ", "), maxPortList)
}

// portRefError is a per-port annotation naming a port the Service does
// not have (or one port twice, by number and by name): input the user
// fixes on the Service, errors.Is annotation.ErrInvalid.
type portRefError struct {
	name, port string
	twice      string // the PORT that named the same port before, if any
	ports      string // portList
}

func (e *portRefError) Error() string {
	if e.twice != "" {
		return fmt.Sprintf("annotation %q: port %q is the port %q names too: expected each port of spec.ports listed once (%s)", e.name, e.port, e.twice, e.ports)
	}
	return fmt.Sprintf("annotation %q: port %q is not a port of the service: expected a port name or number of spec.ports (%s)", e.name, e.port, e.ports)
}

// Is reports whether target is annotation.ErrInvalid.
func (e *portRefError) Is(target error) bool { return target == annotation.ErrInvalid }
