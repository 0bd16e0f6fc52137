package gce

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud"
	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/meta"
	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/mock"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	gcp "k8s.io/cloud-provider-gcp/providers/gce"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// The fixture: three running VMs in the fake's zone, named as GCE names
// its nodes' instances (the Node name is the instance name, which is how
// GCE finds an instance for a load balancer or a route) and tagged with a
// common network tag that prefixes their names, as GCE's firewall rules
// need (gce_instances.go computeHostTags: the longest tag that prefixes
// the instance name).
const (
	nodeTag     = "gce-node"
	fixtureVMs  = 3
	machineType = "e2-standard-4"
)

// sandbox is one fresh fake GCE cloud and the test project around it: the
// suite's hooks reach into its mock directly, bypassing the provider.
type sandbox struct {
	vals gcp.TestClusterValues
	g    *gcp.Cloud
	mock *cloud.MockGCE

	meter conformance.Meter // Hooks.Writes and Hooks.Outage
	vms   atomic.Int32      // instances created, for their IPs
	lbIPs atomic.Int32      // static addresses handed out
}

// newTarget is Config.NewTarget: a fresh fake GCE cloud per rule, with its
// fixture VMs and the Nodes the cloud node controller would have made of
// them.
func newTarget(context.Context) (*conformance.Target, error) {
	s, err := newSandbox()
	if err != nil {
		return nil, err
	}
	var nodes []*v1.Node
	for i := range fixtureVMs {
		n, err := s.addVM(fmt.Sprintf("%s-%d", nodeTag, i))
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	return &conformance.Target{
		Cloud: s.g,
		Nodes: nodes,
		Ready: s.ready,
		Hooks: conformance.Hooks{
			CreateInstance:    s.createInstance,
			StopInstance:      s.setStatus("TERMINATED"), // GCE's state of a stopped VM
			StartInstance:     s.setStatus("RUNNING"),
			TerminateInstance: s.deleteVM,
			Owned:             s.owned,
			Writes:            s.meter.Writes,
			Outage:            s.meter.Outage,
			Backends:          s.backends,
			Listeners:         s.listeners,
			SourceRanges:      s.sourceRanges,
			HealthCheck:       s.healthCheck,
		},
	}, nil
}

// ready waits until GCE's cluster ID can be read. GCE's Initialize
// (gce.go) starts watchClusterID in a goroutine, which sets up the ID's
// store (gce_clusterid.go); until that goroutine has run, every call that
// names a GCE resource after the cluster ID (EnsureLoadBalancer's firewall
// and health check among them) fails "Cloud.ClusterID is not ready". A
// CCM's controllers wait for their informers first, which gives it time;
// here the rule would fail or skip at random without this wait.
func (s *sandbox) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := s.g.ClusterID.GetID()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ClusterID.GetID() = %w after %w", err, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// newSandbox builds the fake as GCE's own tests do (gce_util.go
// fakeGCECloud, unexported: its steps are repeated here), with the mock
// made stateful where its generated methods are no-ops, and wrapped for
// Hooks.Writes and Hooks.Outage.
func newSandbox() (*sandbox, error) {
	vals := gcp.DefaultTestClusterValues()
	g := gcp.NewFakeGCECloud(vals)
	g.AlphaFeatureGate = gcp.NewAlphaFeatureGate(nil)
	if err := initNodeZones(g); err != nil {
		return nil, err
	}
	m, ok := g.Compute().(*cloud.MockGCE)
	if !ok {
		return nil, fmt.Errorf("the fake's compute client is a %T, expected *cloud.MockGCE", g.Compute())
	}
	s := &sandbox{vals: vals, g: g, mock: m}
	// During an outage, the error the compute API's front end returns.
	s.meter.Err = &googleapi.Error{Code: http.StatusServiceUnavailable, Message: "conformance: simulated outage of the compute API"}
	s.makeStateful()
	meterHooks(&s.meter, mockStructs(m)...)
	return s, nil
}

// initNodeZones gives the fake the empty node-zone map CreateGCECloud
// gives a real Cloud (gce.go): NewFakeGCECloud leaves it nil, and
// SetInformers' node handler (gce.go updateNodeZones) then panics on the
// first Node with a zone label, in an informer goroutine, which ends the
// test binary. The field is unexported: set by reflection.
func initNodeZones(g *gcp.Cloud) error {
	f, err := unexported(g, "nodeZones")
	if err != nil {
		return err
	}
	if f.Kind() != reflect.Map {
		return fmt.Errorf("gce.Cloud.nodeZones is a %v, expected a map", f.Type())
	}
	if f.IsNil() {
		f.Set(reflect.MakeMap(f.Type()))
	}
	return nil
}

// unexported returns the settable unexported field name of g.
func unexported(g *gcp.Cloud, name string) (reflect.Value, error) {
	f := reflect.ValueOf(g).Elem().FieldByName(name)
	if !f.IsValid() {
		return reflect.Value{}, fmt.Errorf("gce.Cloud has no field %s: a workaround for k8s.io/cloud-provider-gcp v0.28.2 needs updating", name)
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), nil //nolint:gosec // G103: works around k8s.io/cloud-provider-gcp v0.28.2 by setting an unexported field, which reflection cannot
}

// makeStateful sets the hooks that give the mock the state a real project
// keeps, where the generated methods are no-ops or share objects without
// the mock's lock. GCE's fakeGCECloud sets the vendor's hooks from
// pkg/cloud/mock for the same methods; those that give every address the
// same IP (mock.InsertAddressHook: its IP counter is passed by value and
// never advances, so every load balancer gets 1.2.3.0), or change stored
// objects without the mock's lock while its Get hands the stored object
// itself to GCE (mock.AddInstanceHook, RemoveInstanceHook,
// UpdateFirewallHook: a latent data race, not reported by -race on the
// suite's concurrent rules), are replaced by equivalents that replace
// objects under the lock. HttpHealthChecks.Update is a no-op in the
// mock and in fakeGCECloud; here it stores the update. Two behaviours of
// the compute API that GCE relies on and the mock lacks are added: a
// forwarding rule created without a load-balancing scheme is EXTERNAL (the
// API's default; without it gce_loadbalancer.go EnsureLoadBalancer sees a
// scheme change on every call and deletes and rebuilds the whole load
// balancer), and a target pool or health check still referenced cannot be
// deleted (400 "being used by", which gce_loadbalancer_external.go
// DeleteExternalTargetPoolAndChecks takes for "shared, keep it"; without it
// deleting one Service's load balancer deletes the nodes health check every
// other Service's target pool uses).
func (s *sandbox) makeStateful() {
	m := s.mock
	m.MockForwardingRules.InsertHook = insertForwardingRule
	m.MockAddresses.InsertHook = s.insertAddress
	m.MockTargetPools.AddInstanceHook = addPoolInstances
	m.MockTargetPools.RemoveInstanceHook = removePoolInstances
	m.MockTargetPools.DeleteHook = s.deleteTargetPool
	m.MockHttpHealthChecks.DeleteHook = s.deleteHTTPHealthCheck
	m.MockFirewalls.UpdateHook = replaceFirewall
	m.MockFirewalls.PatchHook = replaceFirewall
	m.MockHttpHealthChecks.UpdateHook = replaceHTTPHealthCheck
	m.MockZones.Objects[*meta.GlobalKey(s.vals.ZoneName)] = &cloud.MockZonesObj{Obj: &compute.Zone{
		Name: s.vals.ZoneName, Region: s.regionLink(),
	}}
}

// mockStructs returns every per-resource mock of m (*cloud.MockAddresses,
// *cloud.MockAlphaAddresses…), as countHooks and failHooks take them.
func mockStructs(m *cloud.MockGCE) []any {
	var out []any
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			out = append(out, f.Interface())
		}
	}
	return out
}

func (s *sandbox) regionLink() string {
	return "https://www.googleapis.com/compute/v1/projects/" + s.vals.ProjectID + "/regions/" + s.vals.Region
}

func (s *sandbox) zoneLink() string {
	return "https://www.googleapis.com/compute/v1/projects/" + s.vals.ProjectID + "/zones/" + s.vals.ZoneName
}

func (s *sandbox) providerID(name string) string {
	return "gce://" + s.vals.ProjectID + "/" + s.vals.ZoneName + "/" + name
}

// addVM creates a running instance named name in the fake's zone, behind
// the provider's back (no counted write), and returns its Node as the
// cloud node controller initializes it: the provider ID, the addresses
// GCE reports (gce_instances.go nodeAddressesFromInstance: the
// interface's IP, then its access config's NAT IP) and the kubelet's
// Hostname, the topology and instance-type labels.
func (s *sandbox) addVM(name string) (*v1.Node, error) {
	i := s.vms.Add(1)
	internal := fmt.Sprintf("10.128.0.%d", 10+i)
	external := fmt.Sprintf("203.0.113.%d", 10+i)
	tags := []string{nodeTag}
	if !strings.HasPrefix(name, nodeTag) {
		tags = append(tags, name) // GCE needs a tag prefixing the name
	}
	key := meta.ZonalKey(name, s.vals.ZoneName)
	vm := &compute.Instance{
		Name:        name,
		Id:          uint64(1000 + i), //nolint:gosec // G115: i numbers the test's few nodes
		Zone:        s.zoneLink(),
		MachineType: s.zoneLink() + "/machineTypes/" + machineType,
		Status:      "RUNNING",
		Tags:        &compute.Tags{Items: tags},
		NetworkInterfaces: []*compute.NetworkInterface{{
			Name:          "nic0",
			NetworkIP:     internal,
			AccessConfigs: []*compute.AccessConfig{{Name: "External NAT", Type: "ONE_TO_ONE_NAT", NatIP: external}},
		}},
		SelfLink: s.zoneLink() + "/instances/" + name,
	}
	m := s.mock.MockInstances
	m.Lock.Lock()
	defer m.Lock.Unlock()
	if _, ok := m.Objects[*key]; ok {
		return nil, fmt.Errorf("instance %s exists", name)
	}
	m.Objects[*key] = &cloud.MockInstancesObj{Obj: vm}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uuid.NewUUID(), Labels: map[string]string{
			v1.LabelHostname:                name,
			v1.LabelInstanceType:            machineType,
			v1.LabelInstanceTypeStable:      machineType,
			v1.LabelFailureDomainBetaZone:   s.vals.ZoneName,
			v1.LabelTopologyZone:            s.vals.ZoneName,
			v1.LabelFailureDomainBetaRegion: s.vals.Region,
			v1.LabelTopologyRegion:          s.vals.Region,
		}},
		Spec: v1.NodeSpec{ProviderID: s.providerID(name)},
		Status: v1.NodeStatus{
			Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: internal},
				{Type: v1.NodeExternalIP, Address: external},
				{Type: v1.NodeHostName, Address: name},
			},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}},
		},
	}, nil
}

func (s *sandbox) createInstance(_ context.Context, name string) (*v1.Node, error) {
	return s.addVM(name)
}

// vmKey is the mock key of node's instance: from its provider ID, else its
// name.
func (s *sandbox) vmKey(node *v1.Node) *meta.Key {
	if p, ok := strings.CutPrefix(node.Spec.ProviderID, "gce://"); ok {
		if parts := strings.Split(p, "/"); len(parts) == 3 {
			return meta.ZonalKey(parts[2], parts[1])
		}
	}
	return meta.ZonalKey(node.Name, s.vals.ZoneName)
}

// setStatus returns a hook that sets the status of a node's instance:
// "TERMINATED" is a stopped VM on GCE (it keeps its disks and name),
// "RUNNING" a started one.
func (s *sandbox) setStatus(status string) func(context.Context, *v1.Node) error {
	return func(_ context.Context, node *v1.Node) error {
		key := s.vmKey(node)
		m := s.mock.MockInstances
		m.Lock.Lock()
		defer m.Lock.Unlock()
		o, ok := m.Objects[*key]
		if !ok {
			return fmt.Errorf("no instance %v", key)
		}
		vm := *o.ToGA()
		vm.Status = status
		m.Objects[*key] = &cloud.MockInstancesObj{Obj: &vm}
		return nil
	}
}

// deleteVM is Hooks.TerminateInstance: a terminated (deleted) VM is gone
// from the project.
func (s *sandbox) deleteVM(_ context.Context, node *v1.Node) error {
	key := s.vmKey(node)
	m := s.mock.MockInstances
	m.Lock.Lock()
	defer m.Lock.Unlock()
	if _, ok := m.Objects[*key]; !ok {
		return fmt.Errorf("no instance %v", key)
	}
	delete(m.Objects, *key)
	return nil
}

// fixtureKinds are the mock resources the test project, not the provider,
// fills.
var fixtureKinds = []string{"Instances", "Zones", "Regions", "Projects", "Networks", "Subnetworks"}

// owned is Hooks.Owned: every object of every mock resource but the
// fixtures', as "Kind/scope/name". The alpha and beta mocks of a resource
// share the GA mock's objects (cloud.NewMockGCE): each map is read once,
// under the GA mock's lock where there is one.
func (s *sandbox) owned(context.Context) ([]string, error) {
	var out []string
	seen := map[uintptr]bool{}
	v := reflect.ValueOf(s.mock).Elem()
	fields := make([]int, v.NumField())
	for i := range fields {
		fields[i] = i
	}
	// GA mocks first: GCE writes through them, under their locks.
	slices.SortStableFunc(fields, func(a, b int) int {
		return boolInt(isVersioned(v.Type().Field(a).Name)) - boolInt(isVersioned(v.Type().Field(b).Name))
	})
	for _, i := range fields {
		name := v.Type().Field(i).Name
		kind := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(name, "Mock"), "Alpha"), "Beta")
		f := v.Field(i)
		if f.Kind() != reflect.Pointer || f.IsNil() || slices.Contains(fixtureKinds, kind) {
			continue
		}
		objs := f.Elem().FieldByName("Objects")
		lock, ok := f.Elem().FieldByName("Lock").Addr().Interface().(*sync.Mutex)
		if !ok || objs.Kind() != reflect.Map || seen[objs.Pointer()] {
			continue
		}
		seen[objs.Pointer()] = true
		lock.Lock()
		for _, k := range objs.MapKeys() {
			key := k.Interface().(meta.Key)
			out = append(out, kind+"/"+scope(key)+"/"+key.Name)
		}
		lock.Unlock()
	}
	slices.Sort(out)
	return out, nil
}

func isVersioned(field string) bool {
	return strings.HasPrefix(field, "MockAlpha") || strings.HasPrefix(field, "MockBeta")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func scope(k meta.Key) string {
	switch {
	case k.Zone != "":
		return k.Zone
	case k.Region != "":
		return k.Region
	}
	return "global"
}

// lbName is the name of every part of svc's load balancer: GCE ignores
// the cluster name (gce_loadbalancer.go GetLoadBalancerName:
// cloudprovider.DefaultLoadBalancerName, "a" and the Service UID).
func (s *sandbox) lbName(ctx context.Context, cluster string, svc *v1.Service) string {
	return s.g.GetLoadBalancerName(ctx, cluster, svc)
}

func (s *sandbox) targetPool(name string) (*compute.TargetPool, error) {
	m := s.mock.MockTargetPools
	m.Lock.Lock()
	defer m.Lock.Unlock()
	if o, ok := m.Objects[*meta.RegionalKey(name, s.vals.Region)]; ok {
		return o.ToGA(), nil
	}
	return nil, fmt.Errorf("no target pool %s in %s", name, s.vals.Region)
}

func (s *sandbox) forwardingRule(name string) (*compute.ForwardingRule, error) {
	m := s.mock.MockForwardingRules
	m.Lock.Lock()
	defer m.Lock.Unlock()
	if o, ok := m.Objects[*meta.RegionalKey(name, s.vals.Region)]; ok {
		return o.ToGA(), nil
	}
	return nil, fmt.Errorf("no forwarding rule %s in %s", name, s.vals.Region)
}

func (s *sandbox) firewall(name string) (*compute.Firewall, bool) {
	m := s.mock.MockFirewalls
	m.Lock.Lock()
	defer m.Lock.Unlock()
	if o, ok := m.Objects[*meta.GlobalKey(name)]; ok {
		return o.ToGA(), true
	}
	return nil, false
}

// backends is Hooks.Backends: the instances of the Service's target pool,
// by name, which is the Node name on GCE.
func (s *sandbox) backends(ctx context.Context, cluster string, svc *v1.Service) ([]string, error) {
	tp, err := s.targetPool(s.lbName(ctx, cluster, svc))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, link := range tp.Instances {
		out = append(out, link[strings.LastIndex(link, "/")+1:])
	}
	return out, nil
}

// listeners is Hooks.Listeners. A GCE network load balancer is a
// forwarding rule (a protocol and one port range, min to max of the
// Service's ports) to a target pool; it passes packets through to the
// nodes unchanged, on the Service port, and the node firewall rule
// k8s-fw-<name> lets only the Service's ports through. The listeners are
// the ports both let through; there is no node port (0).
func (s *sandbox) listeners(ctx context.Context, cluster string, svc *v1.Service) ([]conformance.Listener, error) {
	name := s.lbName(ctx, cluster, svc)
	fr, err := s.forwardingRule(name)
	if err != nil {
		return nil, err
	}
	lo, hi, err := portRange(fr.PortRange)
	if err != nil {
		return nil, fmt.Errorf("forwarding rule %s: %w", name, err)
	}
	fw, ok := s.firewall(gcp.MakeFirewallName(name))
	if !ok {
		return nil, nil // nothing reaches the nodes
	}
	var out []conformance.Listener
	for _, a := range fw.Allowed {
		if !strings.EqualFold(a.IPProtocol, fr.IPProtocol) {
			continue
		}
		for _, p := range a.Ports {
			plo, phi, err := portRange(p)
			if err != nil {
				return nil, fmt.Errorf("firewall %s: %w", fw.Name, err)
			}
			for port := max(lo, plo); port <= min(hi, phi); port++ {
				out = append(out, conformance.Listener{Protocol: v1.Protocol(strings.ToUpper(fr.IPProtocol)), Port: port})
			}
		}
	}
	return out, nil
}

// portRange parses "80", "80-80" or "80-443".
func portRange(s string) (lo, hi int32, err error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	l, err1 := strconv.ParseInt(a, 10, 32)
	h, err2 := strconv.ParseInt(b, 10, 32)
	if err1 != nil || err2 != nil || l > h {
		return 0, 0, fmt.Errorf("malformed port range %q", s)
	}
	return int32(l), int32(h), nil
}

// sourceRanges is Hooks.SourceRanges: the source ranges of the node
// firewall rule of the Service's load balancer (the forwarding rule has
// none: a GCE network load balancer filters nothing itself).
func (s *sandbox) sourceRanges(ctx context.Context, cluster string, svc *v1.Service) ([]string, error) {
	name := gcp.MakeFirewallName(s.lbName(ctx, cluster, svc))
	fw, ok := s.firewall(name)
	if !ok {
		return nil, fmt.Errorf("no firewall %s", name)
	}
	return fw.SourceRanges, nil
}

// healthCheck is Hooks.HealthCheck: the legacy HTTP health check the
// target pool references (GCE's own, k8s-<cluster-id>-node-http-hc on
// kube-proxy's 10256 /healthz, for externalTrafficPolicy Cluster; the
// Service's own on its healthCheckNodePort for Local).
func (s *sandbox) healthCheck(ctx context.Context, cluster string, svc *v1.Service) (conformance.HealthCheck, error) {
	tp, err := s.targetPool(s.lbName(ctx, cluster, svc))
	if err != nil {
		return conformance.HealthCheck{}, err
	}
	if len(tp.HealthChecks) != 1 {
		return conformance.HealthCheck{}, fmt.Errorf("target pool %s has health checks %q, expected one", tp.Name, tp.HealthChecks)
	}
	link := tp.HealthChecks[0]
	name := link[strings.LastIndex(link, "/")+1:]
	m := s.mock.MockHttpHealthChecks
	m.Lock.Lock()
	defer m.Lock.Unlock()
	o, ok := m.Objects[*meta.GlobalKey(name)]
	if !ok {
		return conformance.HealthCheck{}, fmt.Errorf("target pool %s references health check %s, which does not exist", tp.Name, name)
	}
	hc := o.ToGA()
	return conformance.HealthCheck{Port: int32(hc.Port), Path: hc.RequestPath}, nil //nolint:gosec // G115: a health-check port the GCE provider set, 1-65535
}

// ---------------------------------------------------------------------------
// Stateful mock methods, each under the mock's lock, replacing stored
// objects instead of changing them (the mock's Get returns the stored
// object itself).

// insertAddress reserves a static address as GCE's API does: a name
// conflict is 409, an IP in use 400, an empty IP gets a fresh one.
func (s *sandbox) insertAddress(ctx context.Context, key *meta.Key, obj *compute.Address, m *cloud.MockAddresses, _ ...cloud.Option) (bool, error) {
	m.Lock.Lock()
	defer m.Lock.Unlock()
	if _, ok := m.Objects[*key]; ok {
		return true, &googleapi.Error{Code: http.StatusConflict, Message: fmt.Sprintf("address %s exists", key.Name)}
	}
	a := *obj
	if a.Address != "" {
		for _, o := range m.Objects {
			if o.ToGA().Address == a.Address {
				return true, &googleapi.Error{Code: http.StatusBadRequest, Message: fmt.Sprintf("IP %s is in use", a.Address)}
			}
		}
	} else {
		n := s.lbIPs.Add(1)
		a.Address = fmt.Sprintf("198.18.%d.%d", n/250, n%250+1)
	}
	if a.AddressType == "" {
		a.AddressType = "EXTERNAL"
	}
	if a.NetworkTier == "" {
		a.NetworkTier = cloud.NetworkTierDefault.ToGCEValue()
	}
	a.Name, a.Region, a.Status = key.Name, s.regionLink(), "RESERVED"
	a.SelfLink = s.regionLink() + "/addresses/" + key.Name
	m.Objects[*key] = &cloud.MockAddressesObj{Obj: &a}
	return true, nil
}

// insertForwardingRule is the vendor's insert (mock.InsertFwdRuleHook: a
// conflict is 409, the network tier defaults to PREMIUM) with the API's
// other default: loadBalancingScheme EXTERNAL.
func insertForwardingRule(ctx context.Context, key *meta.Key, obj *compute.ForwardingRule, m *cloud.MockForwardingRules, options ...cloud.Option) (bool, error) {
	fr := *obj
	if fr.LoadBalancingScheme == "" {
		fr.LoadBalancingScheme = string(cloud.SchemeExternal)
	}
	return mock.InsertFwdRuleHook(ctx, key, &fr, m, options...)
}

// deleteTargetPool refuses, as the API does, to delete a target pool a
// forwarding rule targets.
func (s *sandbox) deleteTargetPool(_ context.Context, key *meta.Key, _ *cloud.MockTargetPools, _ ...cloud.Option) (bool, error) {
	m := s.mock.MockForwardingRules
	m.Lock.Lock()
	defer m.Lock.Unlock()
	for _, o := range m.Objects {
		if fr := o.ToGA(); strings.HasSuffix(fr.Target, "/targetPools/"+key.Name) {
			return true, inUse("targetPool", key.Name, fr.Name)
		}
	}
	return false, nil
}

// deleteHTTPHealthCheck refuses, as the API does, to delete an HTTP health
// check a target pool references.
func (s *sandbox) deleteHTTPHealthCheck(_ context.Context, key *meta.Key, _ *cloud.MockHttpHealthChecks, _ ...cloud.Option) (bool, error) {
	m := s.mock.MockTargetPools
	m.Lock.Lock()
	defer m.Lock.Unlock()
	for _, o := range m.Objects {
		tp := o.ToGA()
		for _, link := range tp.HealthChecks {
			if strings.HasSuffix(link, "/httpHealthChecks/"+key.Name) {
				return true, inUse("httpHealthCheck", key.Name, tp.Name)
			}
		}
	}
	return false, nil
}

// inUse is the API's error for deleting a referenced resource (reason
// resourceInUseByAnotherResource), as gce_util.go isInUsedByError reads it.
func inUse(kind, name, user string) error {
	return &googleapi.Error{Code: http.StatusBadRequest, Message: fmt.Sprintf("The %s resource '%s' is already being used by '%s'", kind, name, user)}
}

func notFound(what string, key *meta.Key) error {
	return &googleapi.Error{Code: http.StatusNotFound, Message: fmt.Sprintf("%s %s not found", what, key.Name)}
}

func addPoolInstances(_ context.Context, key *meta.Key, req *compute.TargetPoolsAddInstanceRequest, m *cloud.MockTargetPools, _ ...cloud.Option) error {
	m.Lock.Lock()
	defer m.Lock.Unlock()
	o, ok := m.Objects[*key]
	if !ok {
		return notFound("target pool", key)
	}
	tp := *o.ToGA()
	tp.Instances = slices.Clone(tp.Instances)
	for _, r := range req.Instances {
		if !slices.Contains(tp.Instances, r.Instance) {
			tp.Instances = append(tp.Instances, r.Instance)
		}
	}
	m.Objects[*key] = &cloud.MockTargetPoolsObj{Obj: &tp}
	return nil
}

func removePoolInstances(_ context.Context, key *meta.Key, req *compute.TargetPoolsRemoveInstanceRequest, m *cloud.MockTargetPools, _ ...cloud.Option) error {
	m.Lock.Lock()
	defer m.Lock.Unlock()
	o, ok := m.Objects[*key]
	if !ok {
		return notFound("target pool", key)
	}
	tp := *o.ToGA()
	tp.Instances = slices.DeleteFunc(slices.Clone(tp.Instances), func(link string) bool {
		return slices.ContainsFunc(req.Instances, func(r *compute.InstanceReference) bool { return r.Instance == link })
	})
	m.Objects[*key] = &cloud.MockTargetPoolsObj{Obj: &tp}
	return nil
}

// replaceFirewall is the firewalls' Update and Patch: GCE always sends the
// whole rule (gce_loadbalancer_external.go firewallObject).
func replaceFirewall(_ context.Context, key *meta.Key, obj *compute.Firewall, m *cloud.MockFirewalls, _ ...cloud.Option) error {
	m.Lock.Lock()
	defer m.Lock.Unlock()
	o, ok := m.Objects[*key]
	if !ok {
		return notFound("firewall", key)
	}
	fw := *obj
	fw.Name, fw.SelfLink = key.Name, o.ToGA().SelfLink
	m.Objects[*key] = &cloud.MockFirewallsObj{Obj: &fw}
	return nil
}

func replaceHTTPHealthCheck(_ context.Context, key *meta.Key, obj *compute.HttpHealthCheck, m *cloud.MockHttpHealthChecks, _ ...cloud.Option) error {
	m.Lock.Lock()
	defer m.Lock.Unlock()
	o, ok := m.Objects[*key]
	if !ok {
		return notFound("HTTP health check", key)
	}
	hc := *obj
	hc.Name, hc.SelfLink = key.Name, o.ToGA().SelfLink
	m.Objects[*key] = &cloud.MockHttpHealthChecksObj{Obj: &hc}
	return nil
}
