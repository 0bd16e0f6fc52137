package fake

import (
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// InstanceState is the lifecycle state of a fake instance.
type InstanceState string

// The instance states. The empty state, in an Instance given to the fake,
// means StateRunning.
const (
	StateRunning    InstanceState = "running"
	StateStopped    InstanceState = "stopped"
	StateTerminated InstanceState = "terminated"
)

// Instance is one virtual machine of the fake cloud: what the cloud-config
// seeds, what AddInstance and POST /instances take, and what the fake
// reports. JSON (and YAML) field names are the json tags.
//
// When adding an instance only Name is required: an empty ID becomes the
// next free "i-<n>", an empty Zone, Region or Type the Default* constants,
// empty InternalIPs the next free address of each Config.InstanceCIDRs
// network, an empty Hostname the Name, an empty State StateRunning.
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
	State  InstanceState     `json:"state,omitempty"`
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
		errs = append(errs, checkValue(path.Child("name"), in.Name, validation.IsDNS1123Subdomain, "expected a DNS-1123 subdomain (a Node name)")...)
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
			errs = append(errs, checkValue(path.Child(f.name), f.value, validation.IsValidLabelValue, "expected a valid label value")...)
		}
	}
	for _, list := range []struct {
		name string
		ips  []string
	}{{"internalIPs", in.InternalIPs}, {"externalIPs", in.ExternalIPs}} {
		seen := map[netip.Addr]bool{}
		for i, s := range list.ips {
			ip, problem := nodeIP(s)
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
		errs = append(errs, checkValue(path.Child("hostname"), in.Hostname, validation.IsDNS1123Subdomain, "expected a DNS-1123 subdomain")...)
	}
	for k, v := range in.Labels {
		p := path.Child("labels").Key(k)
		if keyErrs := checkValue(p, k, validation.IsQualifiedName, "expected a qualified name"); keyErrs != nil {
			errs = append(errs, keyErrs...)
		} else if isKubernetesLabel(k) {
			errs = append(errs, field.Invalid(p, clipValue(k), "expected a key outside the kubernetes.io and k8s.io namespaces, which the node controller discards"))
		}
		errs = append(errs, checkValue(p, v, validation.IsValidLabelValue, "expected a valid label value")...)
	}
	switch in.State {
	case "", StateRunning, StateStopped, StateTerminated:
	default:
		errs = append(errs, field.NotSupported(path.Child("state"), clipValue(string(in.State)), []string{string(StateRunning), string(StateStopped), string(StateTerminated)}))
	}
	return errs
}

// nodeIP parses s as the IP address of a node (an instance's address, a
// route's target address) and returns it, or says what was expected: an
// IPv4 or IPv6 address in standard notation, without zone, an IPv4 address
// spelled as IPv4 (not IPv4-mapped IPv6, which instances.BuildAddresses
// rejects too), and unicast.
func nodeIP(s string) (netip.Addr, string) {
	ip, err := netip.ParseAddr(s)
	switch {
	case err != nil || ip.Zone() != "":
		return netip.Addr{}, "expected an IPv4 or IPv6 address without zone"
	case ip.Is4In6():
		return netip.Addr{}, "expected an IPv4 address in dotted form (" + ip.Unmap().String() + "), not IPv4-mapped IPv6"
	case ip.IsUnspecified() || ip.IsMulticast():
		return netip.Addr{}, "expected a unicast address"
	}
	return ip, ""
}

// isKubernetesLabel reports whether key is in the kubernetes.io or k8s.io
// namespace (or a subdomain of them).
func isKubernetesLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, ns := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == ns || strings.HasSuffix(prefix, "."+ns) {
			return true
		}
	}
	return false
}

// LoadBalancer is one load balancer of the fake cloud, as the fake reports
// it (Snapshot, GET /loadbalancers). Addresses and CIDRs are strings in
// canonical form.
type LoadBalancer struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Tags hold the ownership tags (loadbalancer.TagCluster,
	// TagServiceUID, TagService).
	Tags            map[string]string `json:"tags"`
	IPFamilies      []string          `json:"ipFamilies"`
	RequestedIPs    []string          `json:"requestedIPs,omitempty"`
	Listeners       []Listener        `json:"listeners"`
	Backends        []Backend         `json:"backends"`
	HealthCheck     HealthCheck       `json:"healthCheck"`
	SourceRanges    []string          `json:"sourceRanges"`
	SessionAffinity SessionAffinity   `json:"sessionAffinity"`
	Settings        map[string]string `json:"settings,omitempty"`
	// BackendKey is what the cloud matches backends by
	// (loadbalancer.Spec.BackendKey): "" (by Node name) or "ProviderID"
	// (LoadBalancerConfig.Backends instanceID).
	BackendKey string `json:"backendKey,omitempty"`
	// VIPs are the addresses allocated from the pools, one per family.
	VIPs []string `json:"vips"`
	// Ingress is what the load balancer reports to the Service status:
	// empty while it is provisioning.
	Ingress []Ingress `json:"ingress"`
	// Provisioning is true while the load balancer is being provisioned
	// (LoadBalancerConfig.ProvisioningDelay): it reports no ingress yet.
	// Always false in the state file, where ReadyAt decides.
	Provisioning bool `json:"provisioning,omitempty"`
	// ReadyAt is when a load balancer created with a provisioning delay
	// reports its ingress; zero (absent) for one ready at once.
	ReadyAt time.Time `json:"readyAt,omitzero"`
}

// Listener is a front-end port of a load balancer.
type Listener struct {
	Family   string `json:"family"`
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
	NodePort int32  `json:"nodePort"`
}

// Backend is a node behind a load balancer. With LoadBalancerConfig.Backends
// instanceID only ProviderID is kept, and the other fields are empty.
type Backend struct {
	NodeName   string `json:"nodeName,omitempty"`
	ProviderID string `json:"providerID"`
	IPv4       string `json:"ipv4,omitempty"`
	IPv6       string `json:"ipv6,omitempty"`
}

// HealthCheck is how a load balancer probes its backends.
type HealthCheck struct {
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
	Path     string `json:"path"`
}

// SessionAffinity is a load balancer's client-IP affinity.
type SessionAffinity struct {
	ClientIP       bool  `json:"clientIP"`
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// Ingress is one reported address of a load balancer.
type Ingress struct {
	IP       string `json:"ip,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	IPMode   string `json:"ipMode,omitempty"`
}

// Route is one entry of the fake's route table, which keeps the rules of
// the package documentation's "Routes".
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
	Routes        []Route        `json:"routes"`
	Pools         []Pool         `json:"pools"`
}

// Pool is the use of one address pool.
type Pool struct {
	// Purpose is "instances" or "loadBalancers".
	Purpose   string `json:"purpose"`
	CIDR      string `json:"cidr"`
	Allocated int    `json:"allocated"`
}

// String returns a short description for logs and errors.
func (in Instance) String() string {
	return fmt.Sprintf("instance %q (%s, %s)", in.ID, in.Name, in.State)
}
