package instances

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodehelpers "k8s.io/cloud-provider/node/helpers"

	"github.com/ccmkit/ccmkit/internal/clip"
)

// Address errors. BuildAddresses wraps exactly one of them in every error it
// returns; branch with errors.Is.
var (
	// ErrInvalidAddress reports an address with an unknown type, an empty
	// value, an IP that does not parse or is not usable as a node address, or
	// a DNS name that is not a DNS-1123 subdomain.
	ErrInvalidAddress = errors.New("invalid node address")
	// ErrNoInternalIP reports that no InternalIP is left, or, with
	// RequireDualStack, that one IP family has no InternalIP.
	ErrNoInternalIP = errors.New("no InternalIP node address")
	// ErrProvidedNodeIP reports a provided-node-ip annotation that does not
	// parse or names an IP that is not among the addresses; the node
	// controller refuses to initialize such a Node.
	ErrProvidedNodeIP = errors.New("provided node IP does not match the node addresses")
)

// AddressPolicy is the input of BuildAddresses: which addresses a node must
// have and in what order they are listed. The zero value requires at least
// one InternalIP, lists IPv4 before IPv6, and applies no provided node IP.
type AddressPolicy struct {
	// ProvidedNodeIP is the value of the kubelet's
	// alpha.kubernetes.io/provided-node-ip Node annotation (one IP or a
	// dual-stack pair "a,b"), or "" for none. When set, the canonical list is
	// filtered and reordered with the upstream
	// node/helpers.GetNodeAddressesFromNodeIP, as the node controller does in
	// updateNodeAddressesFromNodeIP: the addresses equal to the provided IPs
	// come first, in annotation order, and they are the only addresses left of
	// their type. Every provided IP must be among the addresses
	// (ErrProvidedNodeIP otherwise).
	ProvidedNodeIP string
	// PreferIPv6 lists IPv6 addresses before IPv4 addresses within each
	// address type; false lists IPv4 first. Set it for IPv6-primary dual-stack clusters: the first
	// InternalIP is the Node's primary IP.
	PreferIPv6 bool
	// RequireDualStack requires an InternalIP of each IP family in the
	// result (ErrNoInternalIP otherwise); false requires no particular
	// family. Note that a single-family
	// ProvidedNodeIP matching an InternalIP leaves only that InternalIP, so it
	// fails this check, exactly as the node controller would drop the other
	// family.
	RequireDualStack bool
	// AllowNoInternalIP accepts a result without any InternalIP; false
	// requires at least one. Leave it false for Node addresses: the
	// contract needs at least one.
	AllowNoInternalIP bool
}

// BuildAddresses returns addrs validated, normalised, de-duplicated and in
// the canonical order, so that the same set of addresses always yields the
// same slice, whatever order and spelling the cloud returned them in.
//
// Validation and normalisation, per address:
//   - Type must be InternalIP, ExternalIP, InternalDNS, ExternalDNS or
//     Hostname.
//   - InternalIP and ExternalIP must be an IPv4 or IPv6 address in standard
//     notation (net/netip syntax: no leading zeros, no zone such as
//     "%eth0"), IPv4 in dotted form (an IPv4-mapped IPv6 address such as
//     "::ffff:10.0.0.1" is an error, as in the API server's strict IP
//     validation, which finds no use for that spelling in Kubernetes:
//     k8s.io/apimachinery pkg/util/validation/ip.go, IsValidIPForLegacyField),
//     not unspecified (0.0.0.0, ::) and not multicast. It is rewritten in
//     canonical form: lower-case and "::" compressed.
//   - InternalDNS, ExternalDNS and Hostname are lower-cased, lose one
//     trailing "." and must then be a DNS-1123 subdomain.
//
// Two addresses are duplicates when their type and normalised value are
// equal; the same IP under two types (InternalIP and ExternalIP) is kept
// twice, as upstream does.
//
// Canonical order: by type (InternalIP, ExternalIP, InternalDNS, ExternalDNS,
// Hostname); within an IP type by family (IPv4 first, IPv6 first with
// PreferIPv6), then by numeric value; within a name type by byte order. When
// policy.ProvidedNodeIP is set, GetNodeAddressesFromNodeIP is then applied to
// that list, which moves the provided IPs to the front (see AddressPolicy).
// The result is a fixed point: BuildAddresses of the result with the same
// policy returns it unchanged, and so does the node controller's own
// GetNodeAddressesFromNodeIP call, so the controller detects no change.
//
// With the canonical order the first InternalIP (the Node's primary IP) is
// the lowest one of the preferred family. When a cloud's primary address is
// not the lowest, either return only the primary as InternalIP, or let the
// kubelet pin it with --node-ip (which sets the provided-node-ip annotation).
//
// BuildAddresses never modifies addrs. An empty result is nil. Errors wrap
// ErrInvalidAddress (naming the index, type and value, and saying what was
// expected), ErrProvidedNodeIP or ErrNoInternalIP; values are quoted cut to
// clip.MaxQuoted bytes. It is safe for concurrent use.
func BuildAddresses(addrs []v1.NodeAddress, policy AddressPolicy) ([]v1.NodeAddress, error) {
	entries := make([]addrEntry, 0, len(addrs))
	for i, a := range addrs {
		e, err := parseAddress(a, policy.PreferIPv6)
		if err != nil {
			return nil, fmt.Errorf("%w: addresses[%d] (type %q, address %q): %w", ErrInvalidAddress, i, cut(string(a.Type)), cut(a.Address), err)
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, compareEntries)
	entries = slices.CompactFunc(entries, func(a, b addrEntry) bool { return compareEntries(a, b) == 0 })

	var out []v1.NodeAddress
	if len(entries) > 0 {
		out = make([]v1.NodeAddress, len(entries))
		for i, e := range entries {
			out[i] = v1.NodeAddress{Type: e.typ, Address: e.text}
		}
	}
	if policy.ProvidedNodeIP != "" {
		// The same call the node controller makes in
		// updateNodeAddressesFromNodeIP (controllers/node/node_controller.go).
		filtered, err := nodehelpers.GetNodeAddressesFromNodeIP(policy.ProvidedNodeIP, out)
		if err != nil {
			// The helper's error quotes the annotation whole: cut it too.
			return nil, fmt.Errorf("%w: annotation %s=%q: expected an IP address, or a dual-stack pair \"a,b\", each among the node's addresses: %s",
				ErrProvidedNodeIP, cloudproviderapi.AnnotationAlphaProvidedIPAddr, cut(policy.ProvidedNodeIP), clip.Quoted(err.Error()))
		}
		out = filtered
		if len(out) == 0 {
			out = nil
		}
	}
	if err := checkInternalIPs(out, policy); err != nil {
		return nil, err
	}
	return out, nil
}

func checkInternalIPs(out []v1.NodeAddress, policy AddressPolicy) error {
	var v4, v6 bool
	for _, a := range out {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		// Addresses are canonical here, so a ':' means IPv6.
		if strings.Contains(a.Address, ":") {
			v6 = true
		} else {
			v4 = true
		}
	}
	switch {
	case policy.RequireDualStack && (!v4 || !v6):
		missing := "IPv4"
		if !v6 {
			missing = "IPv6"
			if !v4 {
				missing = "IPv4 and IPv6"
			}
		}
		return fmt.Errorf("%w: dual-stack is required but there is no %s InternalIP among %v: expected an InternalIP of each family", ErrNoInternalIP, missing, out)
	case !policy.AllowNoInternalIP && !v4 && !v6:
		return fmt.Errorf("%w: addresses %v: expected at least one of type InternalIP", ErrNoInternalIP, out)
	}
	return nil
}

// cut returns s (an address, a type, an annotation) cut to clip.MaxQuoted
// bytes with its length (clip.Quoted): the one bound of every value ccmkit
// quotes, so that a huge value never makes a huge message.
func cut(s string) string { return clip.Quoted(s) }

// typeRank gives the canonical position of each address type; 0 means
// unknown.
func typeRank(t v1.NodeAddressType) int {
	switch t {
	case v1.NodeInternalIP:
		return 1
	case v1.NodeExternalIP:
		return 2
	case v1.NodeInternalDNS:
		return 3
	case v1.NodeExternalDNS:
		return 4
	case v1.NodeHostName:
		return 5
	}
	return 0
}

type addrEntry struct {
	rank   int
	family int // 0 first, 1 second; 0 for names
	ip     netip.Addr
	typ    v1.NodeAddressType
	text   string
}

func compareEntries(a, b addrEntry) int {
	if c := cmp.Compare(a.rank, b.rank); c != 0 {
		return c
	}
	if c := cmp.Compare(a.family, b.family); c != 0 {
		return c
	}
	if a.ip.IsValid() {
		return a.ip.Compare(b.ip)
	}
	return strings.Compare(a.text, b.text)
}

func parseAddress(a v1.NodeAddress, preferIPv6 bool) (addrEntry, error) {
	rank := typeRank(a.Type)
	if rank == 0 {
		return addrEntry{}, fmt.Errorf("unknown type: expected one of %s, %s, %s, %s, %s",
			v1.NodeInternalIP, v1.NodeExternalIP, v1.NodeInternalDNS, v1.NodeExternalDNS, v1.NodeHostName)
	}
	if a.Address == "" {
		return addrEntry{}, errors.New("empty: expected an address")
	}
	e := addrEntry{rank: rank, typ: a.Type}
	if a.Type == v1.NodeInternalIP || a.Type == v1.NodeExternalIP {
		ip, err := netip.ParseAddr(a.Address)
		switch {
		case err != nil && len(a.Address) > clip.MaxQuoted:
			return addrEntry{}, errors.New("expected an IPv4 or IPv6 address") // netip's error quotes it whole
		case err != nil:
			return addrEntry{}, fmt.Errorf("expected an IPv4 or IPv6 address: %w", err)
		case ip.Zone() != "":
			return addrEntry{}, fmt.Errorf("zone %q: expected an IP address without a zone", cut(ip.Zone()))
		case ip.Is4In6():
			return addrEntry{}, fmt.Errorf("expected an IPv4 address in dotted form (%s), not IPv4-mapped IPv6, a spelling Kubernetes' strict IP validation refuses", ip.Unmap())
		case ip.IsUnspecified() || ip.IsMulticast():
			return addrEntry{}, errors.New("unspecified or multicast: expected a unicast address")
		}
		e.ip = ip
		// Keep the caller's string when it is already canonical (the common
		// case), which saves an allocation per address.
		var buf [64]byte
		if canon := ip.AppendTo(buf[:0]); string(canon) == a.Address {
			e.text = a.Address
		} else {
			e.text = string(canon)
		}
		if ip.Is6() != preferIPv6 {
			e.family = 1
		}
		return e, nil
	}
	name := strings.TrimSuffix(strings.ToLower(a.Address), ".")
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return addrEntry{}, fmt.Errorf("expected a DNS-1123 subdomain: %s", strings.Join(msgs, "; "))
	}
	e.text = name
	return e, nil
}
