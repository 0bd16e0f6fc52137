package fake

// This file holds Config.Validate and the checks of each section.

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/check"
)

// Validate implements provider.Validator. It returns every problem found,
// each naming the field path, the value and what was expected (an
// apimachinery field.ErrorList aggregate), or nil.
func (c *Config) Validate() error {
	var errs field.ErrorList
	if id := c.ClusterID; strings.TrimSpace(id) != id {
		errs = append(errs, field.Invalid(field.NewPath("clusterID"), clipValue(id), "expected no leading or trailing white space: it is stored as the owner tag of load balancers and routes"))
	}
	errs = append(errs, validateInstanceCIDRs(field.NewPath("instanceCIDRs"), c.InstanceCIDRs)...)
	errs = append(errs, c.LoadBalancers.validate(field.NewPath("loadBalancers"))...)
	errs = append(errs, c.rateLimit().validate(field.NewPath("rateLimit"))...)
	errs = append(errs, c.Governor.validate(field.NewPath("governor"))...)
	for _, ttl := range []struct {
		name string
		d    time.Duration
	}{{"instanceCacheTTL", c.InstanceCacheTTL.Duration}, {"loadBalancerCacheTTL", c.LoadBalancerCacheTTL.Duration}, {"routes.listTTL", c.Routes.ListTTL.Duration}} {
		if ttl.d < 0 {
			errs = append(errs, field.Invalid(field.NewPath(ttl.name), ttl.d.String(), "expected zero (the default) or a positive duration"))
		}
	}
	if a := c.Admin.Address; a != "" {
		if _, err := loopbackAddress(a); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("admin", "address"), clipValue(a), err.Error()))
		}
	}
	if f := c.StateFile; f != "" && (!filepath.IsAbs(f) || strings.HasSuffix(f, "/")) {
		errs = append(errs, field.Invalid(field.NewPath("stateFile"), clipValue(f), "expected the absolute path of a file: processes sharing it may run in different directories"))
	}
	inst := field.NewPath("instances")
	for i := range c.Instances {
		errs = append(errs, c.Instances[i].validate(inst.Index(i))...)
	}
	errs = append(errs, seedConflicts(inst, c.Instances)...)
	return errs.ToAggregate()
}

// validateInstanceCIDRs checks the instance CIDRs of a Config: each a pool
// (parsePool), at most one per IP family; path names the list in errors.
func validateInstanceCIDRs(path *field.Path, cidrs []string) field.ErrorList {
	var errs field.ErrorList
	var v4, v6 []netip.Prefix
	for i, s := range cidrs {
		p, err := parsePool(s)
		if err != nil {
			errs = append(errs, field.Invalid(path.Index(i), clipValue(s), err.Error()))
			continue
		}
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	if len(v4) > 1 || len(v6) > 1 {
		errs = append(errs, field.Invalid(path, clipValue(strings.Join(cidrs, ", ")), "expected at most one IPv4 and one IPv6 CIDR"))
	}
	return errs
}

// validate checks the section as the cloud-config sets it (defaults not
// filled in); path names it in errors.
func (s LoadBalancerSection) validate(path *field.Path) field.ErrorList {
	errs := s.validatePools(path)
	if suffix := s.HostnameSuffix; suffix != "" {
		errs = append(errs, check.Field(path.Child("hostnameSuffix"), suffix, validation.IsDNS1123Subdomain, "expected a DNS-1123 subdomain")...)
		if s.IPMode != "" {
			errs = append(errs, field.Invalid(path.Child("ipMode"), clipValue(string(s.IPMode)), "expected empty with hostnameSuffix: ipMode applies to IP ingress only"))
		}
	}
	switch s.IPMode {
	case "", v1.LoadBalancerIPModeVIP, v1.LoadBalancerIPModeProxy:
	default:
		errs = append(errs, field.NotSupported(path.Child("ipMode"), clipValue(string(s.IPMode)), []string{"", "VIP", "Proxy"}))
	}
	if d := s.ProvisioningDelay; d != nil && d.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("provisioningDelay"), d.String(), "expected zero (no delay) or a positive duration"))
	}
	if d := s.CoalesceWindow; d != nil && d.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("coalesceWindow"), d.String(), "expected zero (each UpdateLoadBalancer writes) or a positive duration"))
	}
	switch s.Backends {
	case "", BackendsNodeName, BackendsInstanceID:
	default:
		errs = append(errs, field.NotSupported(path.Child("backends"), clipValue(string(s.Backends)), []string{string(BackendsNodeName), string(BackendsInstanceID)}))
	}
	switch s.BackendPools {
	case "", BackendPoolsPerService, BackendPoolsShared:
	default:
		errs = append(errs, field.NotSupported(path.Child("backendPools"), clipValue(string(s.BackendPools)), []string{string(BackendPoolsPerService), string(BackendPoolsShared)}))
	}
	return append(errs, s.validateHierarchy(path)...)
}

// validateHierarchy checks the fields of a hierarchical cloud
// (Hierarchical, BusyAfterWrite); path names the section in errors.
func (s LoadBalancerSection) validateHierarchy(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d := s.BusyAfterWrite; d != nil && d.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("busyAfterWrite"), d.String(), "expected zero (never busy) or a positive duration"))
	}
	if s.Hierarchical && s.BackendPools == BackendPoolsShared {
		errs = append(errs, field.Invalid(path.Child("backendPools"), string(s.BackendPools), fmt.Sprintf(
			"expected %s (or unset) with %s true: a hierarchical cloud keeps a pool per listener, not backend pools shared by load balancers", BackendPoolsPerService, path.Child("hierarchical"))))
	}
	return errs
}

// validatePools checks the section's address pools that are set: each a
// pool (parsePool) of its own IP family; path names the section in errors.
func (s LoadBalancerSection) validatePools(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, pool := range []struct {
		name, value string
		want4       bool
	}{{"ipv4Pool", s.IPv4Pool, true}, {"ipv6Pool", s.IPv6Pool, false}} {
		if pool.value == "" {
			continue
		}
		p, err := parsePool(pool.value)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child(pool.name), clipValue(pool.value), err.Error()))
		case p.Addr().Is4() != pool.want4:
			errs = append(errs, field.Invalid(path.Child(pool.name), clipValue(pool.value), "expected a CIDR of the pool's IP family"))
		}
	}
	return errs
}

// seedConflicts checks the instances a cloud is seeded with against each
// other; path names the list in errors. Each ID, and each address
// (internal or external), belongs to one instance; each name to one
// instance that is not terminated, since a Node without a provider ID is
// looked up by name (a terminated instance may share its name with the
// one that replaced it, as in a cloud). Values are quoted cut to a
// bounded length.
func seedConflicts(path *field.Path, seeds []Instance) field.ErrorList {
	var errs field.ErrorList
	ids := map[string]bool{}
	names := map[string]int{}
	type owner struct {
		instance int
		path     *field.Path
	}
	ips := map[netip.Addr]owner{}
	for i := range seeds {
		in, p := &seeds[i], path.Index(i)
		if in.ID != "" {
			if ids[in.ID] {
				errs = append(errs, field.Duplicate(p.Child("id"), clipValue(in.ID)))
			}
			ids[in.ID] = true
		}
		if in.Name != "" && in.State != instances.StateTerminated {
			if j, dup := names[in.Name]; dup {
				errs = append(errs, field.Invalid(p.Child("name"), clipValue(in.Name), fmt.Sprintf(
					"duplicates %s: expected one instance of a name that is not terminated (a Node without a provider ID is looked up by name)", path.Index(j).Child("name"))))
			} else {
				names[in.Name] = i
			}
		}
		for _, list := range []struct {
			name string
			ips  []string
		}{{"internalIPs", in.InternalIPs}, {"externalIPs", in.ExternalIPs}} {
			for j, s := range list.ips {
				ip, err := netip.ParseAddr(s)
				if err != nil {
					continue // validate says why
				}
				ap := p.Child(list.name).Index(j)
				if other, dup := ips[ip]; dup && other.instance != i {
					errs = append(errs, field.Invalid(ap, clipValue(s), fmt.Sprintf("expected an address no other instance has; %s has it", other.path)))
				} else if !dup {
					ips[ip] = owner{i, ap}
				}
			}
		}
	}
	return errs
}
