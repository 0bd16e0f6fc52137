package fake

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/check"
	bound "github.com/ccmkit/ccmkit/internal/clip"
	"github.com/ccmkit/ccmkit/internal/netaddr"
	"github.com/ccmkit/ccmkit/internal/nodelabel"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// stateNames are the text forms of the instance states, for errors.
var stateNames = []string{"running", "stopped", "terminated"}

// Instance is one virtual machine of the fake cloud: what the cloud-config
// seeds, what AddInstance and POST /instances take, and what the fake
// reports. JSON (and YAML) field names are the json tags.
//
// When adding an instance only Name is required: an empty ID becomes the
// next free "i-<n>", an empty Zone "zone-a", an empty Region "region-1", an empty Type
// "fake.small",
// empty InternalIPs the next free address of each Config.InstanceCIDRs
// network, an empty Hostname the Name.
type Instance struct {
	// ID is the instance ID; the node's provider ID is "fake://<ID>".
	ID string `json:"id,omitempty"`
	// Name is the name of the Node the instance registers as.
	Name   string `json:"name"`
	Zone   string `json:"zone,omitempty"`
	Region string `json:"region,omitempty"`
	Type   string `json:"type,omitempty"`
	// InternalIPs and ExternalIPs are IPv4 and/or IPv6 addresses.
	InternalIPs []string `json:"internalIPs,omitempty"`
	ExternalIPs []string `json:"externalIPs,omitempty"`
	// Hostname is reported as the Hostname node address.
	Hostname string `json:"hostname,omitempty"`
	// Labels become the node's additional labels; keys in the kubernetes.io
	// and k8s.io namespaces are rejected (the node controller drops them).
	Labels map[string]string `json:"labels,omitempty"`
	// State is the instance's lifecycle state; the zero value is
	// instances.StateRunning. It marshals as "running", "stopped" or
	// "terminated".
	State instances.State `json:"state"`
}

func (in *Instance) clone() Instance {
	out := *in
	out.InternalIPs = append([]string(nil), in.InternalIPs...)
	out.ExternalIPs = append([]string(nil), in.ExternalIPs...)
	out.Labels = maps.Clone(in.Labels)
	return out
}

// validate checks the fields of an instance to add; path names it in
// errors.
func (in *Instance) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if in.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "expected the name of the Node the instance registers as"))
	} else {
		errs = append(errs, check.Field(path.Child("name"), in.Name, validation.IsDNS1123Subdomain, "expected a DNS-1123 subdomain (a Node name)")...)
	}
	if in.ID != "" {
		// The ID is the last segment of the provider ID: the codec the
		// instances adapter formats it with must accept it.
		if _, err := codec.Format(in.ID); err != nil {
			errs = append(errs, field.Invalid(path.Child("id"), clipValue(in.ID), "expected no '/', whitespace, control characters or invalid UTF-8 (it is the last segment of the provider ID)"))
		}
	}
	for _, f := range []struct{ name, value string }{{"zone", in.Zone}, {"region", in.Region}, {"type", in.Type}} {
		if f.value != "" {
			errs = append(errs, check.Field(path.Child(f.name), f.value, validation.IsValidLabelValue, "expected a valid label value")...)
		}
	}
	for _, list := range []struct {
		name string
		ips  []string
	}{{"internalIPs", in.InternalIPs}, {"externalIPs", in.ExternalIPs}} {
		seen := map[netip.Addr]bool{}
		for i, s := range list.ips {
			ip, problem := netaddr.NodeIP(s)
			switch {
			case problem != "":
				errs = append(errs, field.Invalid(path.Child(list.name).Index(i), clipValue(s), problem))
			case seen[ip]:
				errs = append(errs, field.Duplicate(path.Child(list.name).Index(i), clipValue(s)))
			}
			seen[ip] = true
		}
	}
	if in.Hostname != "" {
		errs = append(errs, check.Field(path.Child("hostname"), in.Hostname, validation.IsDNS1123Subdomain, "expected a DNS-1123 subdomain")...)
	}
	for k, v := range in.Labels {
		p := path.Child("labels").Key(k)
		if problem := nodelabel.KeyProblem(k); problem != "" {
			errs = append(errs, field.Invalid(p, clipValue(k), problem))
		}
		if problem := nodelabel.ValueProblem(v); problem != "" {
			errs = append(errs, field.Invalid(p, clipValue(v), problem))
		}
	}
	if _, err := in.State.MarshalText(); err != nil {
		errs = append(errs, field.NotSupported(path.Child("state"), int(in.State), stateNames))
	}
	return errs
}

// LoadBalancer is one load balancer of the fake cloud, as the fake
// reports it (Snapshot, LoadBalancerFor, GET /loadbalancers): the
// loadbalancer model the cloud keeps, with its addresses and
// provisioning. Its JSON form is the model's (lowerCamel names) with the
// fields below added.
type LoadBalancer struct {
	loadbalancer.LoadBalancer
	// VIPs are the addresses allocated from the pools, one per family of
	// Spec.IPFamilies, in canonical form.
	VIPs []string `json:"vips"`
	// Provisioning is true while the load balancer is being provisioned
	// (LoadBalancerSection.ProvisioningDelay): it reports no Ingress yet.
	Provisioning bool `json:"provisioning,omitempty"`
	// ReadyAt is when a load balancer created with a provisioning delay
	// reports its ingress; zero (absent) for one ready at once.
	ReadyAt time.Time `json:"readyAt,omitzero"`
	// BusyUntil is when the load balancer stops being busy after its last
	// write (LoadBalancerSection.BusyAfterWrite): a write before then is
	// refused. Zero (absent) for one never busy.
	BusyUntil time.Time `json:"busyUntil,omitzero"`
}

// Route is one entry of the fake's route table.
//
// The route table is one table for the whole cloud, read and written as a
// whole (routes.TableDriver) under a routes.Table, which coalesces the
// route controller's concurrent calls into few writes. Like a real cloud,
// the fake refuses a route it could not route, whichever way it comes in
// (CreateRoute, a table write, AddRoute, a state file being loaded), with
// an error that names the field (route.destinationCIDR for a CreateRoute
// or AddRoute argument, routes[i].<field> in a table or state file, with
// the route's name and cluster), the value, cut to a bounded length, and
// what was expected, and changes nothing:
//
//   - destinationCIDR must be a CIDR whose address is its network address
//     (10.244.1.0/24, not 10.244.1.5/24), without zone, and IPv4 in dotted
//     form (not IPv4-mapped IPv6 such as ::ffff:10.0.0.0/120); its
//     spelling is otherwise kept byte for byte (an upper-case or expanded
//     IPv6 CIDR is fine);
//   - a route of a cluster is a pod route: not a default route (0.0.0.0/0,
//     ::/0), and its destination must not equal, contain or lie in the
//     destination of another cluster's route or of another route of its
//     own cluster (routes.ErrCIDRInUse). Routes of no cluster (Cluster "",
//     the network's own routes, which AddRoute seeds) may be default
//     routes and cover pod routes: a pod route is the more specific route;
//   - targetNode, when set, must be a Node name (a DNS-1123 subdomain);
//   - each target node address must have a node address type and fit it:
//     an IP address (as for instances: no zone, IPv4 in dotted form,
//     unicast) for InternalIP and ExternalIP, a DNS-1123 subdomain for
//     InternalDNS, ExternalDNS and Hostname;
//   - a cluster has one route of each name.
//
// CreateRoute checks its route before the routes.Table batches it, so a
// refused route fails alone, and the table write checks the routes it adds
// or changes again. (What the routes.Table refuses by itself — a
// destination that does not parse, an empty target node — it refuses with
// its own message, naming route.DestinationCIDR or route.TargetNode.)
// Re-creating an existing route (the same name and destination) is not an
// overlap: the Table leaves an equal route as it is and replaces one whose
// target changed. Refusals wrap routes.ErrInvalidRoute or
// routes.ErrCIDRInUse, never an *api.RetryError: they are not retried as
// throttles.
type Route struct {
	// Cluster is the cluster that owns the route: the Config.ClusterID of
	// the Cloud that created it (the --cluster-name of the call without
	// one); empty for a route that belongs to no cluster.
	Cluster             string   `json:"cluster"`
	Name                string   `json:"name"`
	DestinationCIDR     string   `json:"destinationCIDR"`
	TargetNode          string   `json:"targetNode"`
	TargetNodeAddresses []string `json:"targetNodeAddresses,omitempty"`
}

// State is a snapshot of the whole fake cloud (Snapshot, GET /state).
// Instances are sorted by ID, load balancers by ID, routes by cluster, then
// destination.
type State struct {
	ClusterID     string         `json:"clusterID"`
	Instances     []Instance     `json:"instances"`
	LoadBalancers []LoadBalancer `json:"loadBalancers"`
	// BackendPools are the shared backend pools, sorted by ID (see
	// BackendPoolsShared); absent when there are none.
	BackendPools []loadbalancer.Pool `json:"backendPools,omitempty"`
	Routes       []Route             `json:"routes"`
	// AddressPools are the address pools (the JSON key stays "pools").
	AddressPools []AddressPool `json:"pools"`
}

// AddressPool is the use of one address pool: the addresses the cloud
// gives instances or load balancers (Config's pools), not a backend pool
// of load balancers (loadbalancer.Pool).
type AddressPool struct {
	// Purpose is "instances" or "loadBalancers".
	Purpose   string `json:"purpose"`
	CIDR      string `json:"cidr"`
	Allocated int    `json:"allocated"`
}

// maxInstanceIDLen bounds the length of an instance ID, in bytes.
const maxInstanceIDLen = 128

// unsafeInstanceID returns why id cannot be an instance ID, or "" when it
// can: an ID is the last segment of a provider ID and of the admin
// endpoint's /instances/{id} paths, so it must not be "." or "..", nor
// hold '/', '\', '%', '?', '#', white space, control or format characters
// (zero-width, bidirectional overrides) or invalid UTF-8. This holds
// whatever provider.Codec accepts (Instance.validate applies its rules
// too).
func unsafeInstanceID(id string) string {
	switch {
	case id == "":
		return "expected an instance ID"
	case id == "." || id == "..":
		return "expected an ID other than . and .. (a path segment)"
	case len(id) > maxInstanceIDLen:
		return fmt.Sprintf("expected at most %d bytes, got %d", maxInstanceIDLen, len(id))
	case !utf8.ValidString(id):
		return "expected valid UTF-8"
	}
	for _, r := range id {
		if strings.ContainsRune(`/\%?#`, r) || unicode.IsSpace(r) || !unicode.IsGraphic(r) {
			return fmt.Sprintf("expected no %U %q: no '/', '\\', '%%', '?', '#', white space, control, format or unassigned characters (it is a segment of provider IDs and URL paths)", r, r)
		}
	}
	return ""
}

// CheckInstanceID returns an error saying why id cannot be an instance ID
// (it is empty, "." or "..", longer than 128 bytes, or holds a character
// a path segment cannot: see Instance.ID), or nil when it can. The admin
// endpoint (package fake/admin) checks the {id} of its paths with it.
func CheckInstanceID(id string) error {
	if reason := unsafeInstanceID(id); reason != "" {
		return errors.New(reason)
	}
	return nil
}

// validateInstance is Instance.validate plus unsafeInstanceID for a set
// ID; path names the instance in errors.
func validateInstance(path *field.Path, in Instance) field.ErrorList {
	errs := in.validate(path)
	idPath := path.Child("id").String()
	if in.ID == "" || slices.ContainsFunc(errs, func(e *field.Error) bool { return e.Field == idPath }) {
		return errs
	}
	if reason := unsafeInstanceID(in.ID); reason != "" {
		errs = append(errs, field.Invalid(path.Child("id"), clipValue(in.ID), reason))
	}
	return errs
}

// clipValue cuts a value quoted by a field.Error to clip.MaxQuoted bytes
// with its length (clip.Quoted): the one bound of every value ccmkit
// quotes, so that a huge value never makes a huge message.
func clipValue(s string) string { return bound.Quoted(s) }

// clip quotes s for an error message, cut to a bounded length (see
// clipValue).
func clip(s string) string { return strconv.Quote(clipValue(s)) }
