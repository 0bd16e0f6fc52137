package loadbalancer

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/internal/cidr"
)

// Plan returns the actions that bring actual to desired, in a fixed order:
// create (alone, when actual is nil), then tags, front end, settings, health
// check, source ranges, session affinity, listener removals, listener
// updates, listener additions, backend additions, the backend pool
// reference, backend removals (new backends are in service before old ones
// leave: a load balancer moving to a shared pool references it before its
// own backends go, and one leaving a pool has its own backends before the
// reference goes). Each Action carries
// actual.ID and a readable Reason. The result is deterministic and empty
// (nil) when actual already matches desired.
//
// Plan compares only what ccmkit manages: the ownership tags present in
// desired.Tags (other tags are ignored), the Spec, and of Spec.Settings
// only the keys present in desired. Name, ID and Ingress are never
// compared, so a load balancer is never renamed.
//
// A listener whose key is gone and a new listener of the same family and
// protocol (preferring the same node port) become one ActionUpdateListener,
// so changing a Service port is one write.
//
// Backends are matched by desired.Spec.BackendKey (what the cloud keeps of
// a backend: the Node name by default, the instance's provider ID, or an
// address) and compared by nothing else, so no backend is ever both added
// and removed by one plan, and a cloud that reports only instance IDs is
// converged however its Nodes are named. Under the default key a backend
// whose address or provider ID changed is sent again in ActionAddBackends
// (which replaces by key), so it is one write.
//
// actual may list several listeners with one ListenerKey or one backend
// key twice (a Driver reporting what the cloud holds). Plan then emits at
// most one action per listener key and per backend key, relying on
// ActionRemoveListener and ActionUpdateListener acting on every listener of
// the key and on ActionAddBackends replacing every entry of the backend key:
// listeners of a key the Service keeps are replaced by the wanted listener
// (one ActionUpdateListener, none if every copy already equals it), never
// removed, and a backend the Service keeps is never removed.
//
// desired and actual are only read; they need not be in canonical order
// (see Spec). Plan returns an error when desired is nil, has no
// ownership tags or an unknown BackendKey, and an *OwnershipError (errors.Is ErrNotOwned) when
// actual carries ownership tags of another cluster or Service; an actual
// without ccmkit tags is adopted (ActionUpdateTags).
func Plan(desired, actual *LoadBalancer) ([]Action, error) {
	owner, err := desiredOwner(desired)
	if err != nil {
		return nil, err
	}
	if actual == nil {
		return []Action{{Kind: ActionCreate, Create: desired.Clone(),
			Reason: fmt.Sprintf("no load balancer exists for service %s", owner.namespacedName())}}, nil
	}
	if got, tagged := OwnerFromTags(actual.Tags); tagged && !owner.Owns(actual.Tags) {
		return nil, &OwnershipError{ID: actual.ID, Name: actual.Name, Want: owner, Got: got, How: "plan"}
	}
	key := desired.Spec.BackendKey
	if err := key.check("loadbalancer.Plan: desired Spec.BackendKey"); err != nil {
		return nil, err
	}
	d, a := canonicalView(&desired.Spec, key), canonicalView(&actual.Spec, key)
	p := planner{id: actual.ID}
	p.tags(desired.Tags, actual.Tags)
	if !slices.Equal(d.IPFamilies, a.IPFamilies) || !slices.Equal(d.RequestedIPs, a.RequestedIPs) {
		p.add(Action{Kind: ActionUpdateFrontend, IPFamilies: slices.Clone(d.IPFamilies), RequestedIPs: slices.Clone(d.RequestedIPs)},
			"front end is families %v, requested IPs %v; want families %v, requested IPs %v", a.IPFamilies, a.RequestedIPs, d.IPFamilies, d.RequestedIPs)
	}
	p.settings(d.Settings, a.Settings)
	pools := desired.Spec.ListenerPools
	if !pools && d.HealthCheck != a.HealthCheck {
		hc := d.HealthCheck
		p.add(Action{Kind: ActionUpdateHealthCheck, HealthCheck: &hc}, "health check is %s; want %s", formatHC(a.HealthCheck), formatHC(d.HealthCheck))
	}
	if !slices.Equal(d.SourceRanges, a.SourceRanges) {
		p.add(Action{Kind: ActionUpdateSourceRanges, SourceRanges: slices.Clone(d.SourceRanges)},
			"source ranges are [%s]; want [%s]", cidr.Join(a.SourceRanges), cidr.Join(d.SourceRanges))
	}
	if d.SessionAffinity != a.SessionAffinity {
		sa := d.SessionAffinity
		p.add(Action{Kind: ActionUpdateSessionAffinity, SessionAffinity: &sa}, "session affinity is %s; want %s", formatSA(a.SessionAffinity), formatSA(d.SessionAffinity))
	}
	if pools {
		p.listenerPools(d.Listeners, a.Listeners, key)
		return p.actions, nil
	}
	p.listeners(d.Listeners, a.Listeners)
	p.backends(nil, d.Backends, a.Backends, key)
	p.backendPool(d.BackendPool, a.BackendPool)
	return p.actions, nil
}

// backendPool plans the pool reference. It goes before the backend
// removals that backends planned, if any (they are then the action before
// it), after the additions (see Plan).
func (p *planner) backendPool(want, have string) {
	if want == have {
		return
	}
	reason := fmt.Sprintf("backend pool is %q; want %q", have, want)
	switch {
	case have == "":
		reason = fmt.Sprintf("the service's backends are the shared pool %q", want)
	case want == "":
		reason = fmt.Sprintf("the service no longer uses the shared pool %q", have)
	}
	p.add(Action{Kind: ActionUpdateBackendPool, BackendPool: want}, "%s", reason)
	if n := len(p.actions); n >= 2 && p.actions[n-2].Kind == ActionRemoveBackends {
		p.actions[n-2], p.actions[n-1] = p.actions[n-1], p.actions[n-2]
	}
}

// desiredOwner returns the owner named by desired's ownership tags, or
// Plan's error when desired is nil or lacks them.
func desiredOwner(desired *LoadBalancer) (Owner, error) {
	if desired == nil {
		return Owner{}, errors.New("loadbalancer.Plan: desired is nil: expected the load balancer Desired built")
	}
	owner, ok := OwnerFromTags(desired.Tags)
	if !ok || owner.Cluster == "" || owner.UID == "" {
		return Owner{}, fmt.Errorf("loadbalancer.Plan: desired %q has tags %v: expected the ownership tags %s and %s", desired.Name, desired.Tags, TagCluster, TagServiceUID)
	}
	return owner, nil
}

// changedKeys returns, sorted, the keys of want that have is missing or
// maps to another value. Keys only in have are not Plan's business (tags
// and settings ccmkit does not manage).
func changedKeys(want, have map[string]string) []string {
	var keys []string
	for k, v := range want {
		if cur, ok := have[k]; !ok || cur != v {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

type planner struct {
	id      string
	actions []Action
}

func (p *planner) add(a Action, format string, args ...any) {
	a.LoadBalancerID = p.id
	a.Reason = fmt.Sprintf(format, args...)
	p.actions = append(p.actions, a)
}

// tags plans the tag action: every desired tag, when one is missing or
// different (an adopted load balancer, or one whose tags were edited).
func (p *planner) tags(want, have map[string]string) {
	if keys := changedKeys(want, have); len(keys) > 0 {
		p.add(Action{Kind: ActionUpdateTags, Tags: maps.Clone(want)},
			"ownership tags %s missing or different (adopting or repairing)", strings.Join(keys, ", "))
	}
}

// settings plans the settings action: only the desired settings that are
// missing or different.
func (p *planner) settings(want, have map[string]string) {
	keys := changedKeys(want, have)
	if len(keys) == 0 {
		return
	}
	changed := make(map[string]string, len(keys))
	for _, k := range keys {
		changed[k] = want[k]
	}
	p.add(Action{Kind: ActionUpdateSettings, Settings: changed}, "settings %s changed", strings.Join(keys, ", "))
}

// canonicalView returns s if its slices are in canonical order, with its
// backends ordered by key (desired's BackendKey, which an actual load
// balancer need not report), else a canonical copy: Plan never mutates its
// arguments and avoids copying the (large) backend list when it is already
// sorted.
func canonicalView(s *Spec, key BackendKey) *Spec {
	sorted := s.BackendKey == key &&
		isStrictlySorted(s.RequestedIPs, compareAddr) &&
		slices.IsSortedFunc(s.Listeners, compareListener) &&
		slices.IsSortedFunc(s.Backends, key.compareFunc()) &&
		isStrictlySorted(s.SourceRanges, cidr.Compare)
	for _, r := range s.SourceRanges {
		sorted = sorted && r == r.Masked()
	}
	if sorted {
		return s
	}
	c := s.clone()
	c.BackendKey = key
	c.canonicalize()
	return &c
}

func isStrictlySorted[T any](s []T, cmp func(a, b T) int) bool {
	for i := 1; i < len(s); i++ {
		if cmp(s[i-1], s[i]) >= 0 {
			return false
		}
	}
	return true
}

// runs splits s, sorted so that equal elements follow each other, into
// runs of elements that same says are equal, in order. Each run is a
// subslice of s with its capacity cut to its length. A Driver may report
// several listeners with one key, or one backend twice: Plan matches each
// run as one.
func runs[T any](s []T, same func(a, b T) bool) [][]T {
	out := make([][]T, 0, len(s))
	for j := 0; j < len(s); {
		k := j + 1
		for k < len(s) && same(s[j], s[k]) {
			k++
		}
		out = append(out, s[j:k:k])
		j = k
	}
	return out
}

// listed returns ", listed n times" for a key listed more than once.
func listed(run []Listener) string {
	if len(run) < 2 {
		return ""
	}
	return fmt.Sprintf(", listed %d times", len(run))
}

func sameListenerKey(a, b Listener) bool { return a.ListenerKey == b.ListenerKey }

// listenerUpdate replaces every listener of one key (old) by new.
type listenerUpdate struct {
	old []Listener // every listener of the key, as reported
	new Listener
}

// listenerDiff is what the listener actions do: remove runs of listeners
// (one key each), update runs, add listeners.
type listenerDiff struct {
	removed [][]Listener
	updates []listenerUpdate
	added   []Listener
	kept    []listenerUpdate // matched and equal (as listeners: their pools may differ)
}

// diffListeners matches want and have (both sorted by key) by key; with
// keep, it also lists the matched listeners that need no update (kept).
//
// A Driver may report several listeners with one key; they follow each
// other (have is sorted by key, stably). RemoveListener and UpdateListener
// act on every listener of a key (see Apply), so one action per key
// converges, and a key the Service keeps is only ever replaced by its
// wanted listener, never removed.
func diffListeners(want, have []Listener, keep bool) listenerDiff {
	var d listenerDiff
	i := 0
	for _, run := range runs(have, sameListenerKey) {
		key := run[0].ListenerKey
		for i < len(want) && want[i].ListenerKey.compare(key) < 0 {
			d.added = append(d.added, want[i])
			i++
		}
		if i == len(want) || want[i].ListenerKey != key {
			d.removed = append(d.removed, run)
			continue
		}
		w := want[i]
		i++
		if slices.ContainsFunc(run, func(h Listener) bool { return !w.attrsEqual(h) }) {
			d.updates = append(d.updates, listenerUpdate{run, w})
		} else if keep {
			d.kept = append(d.kept, listenerUpdate{run, w})
		}
	}
	d.added = append(d.added, want[i:]...)
	return d
}

// pairPortChanges turns a removed and an added listener of the same family
// and protocol into one update (a changed Service port is one write):
// first those keeping their node port, then any. Updates end sorted by
// their new key.
func (d *listenerDiff) pairPortChanges() {
	for _, sameNodePort := range []bool{true, false} {
		for ri := 0; ri < len(d.removed); ri++ {
			r := d.removed[ri][0]
			ai := slices.IndexFunc(d.added, func(a Listener) bool {
				return a.Family == r.Family && a.Protocol == r.Protocol && (!sameNodePort || a.NodePort == r.NodePort)
			})
			if ai < 0 {
				continue
			}
			d.updates = append(d.updates, listenerUpdate{d.removed[ri], d.added[ai]})
			d.removed = slices.Delete(d.removed, ri, ri+1)
			d.added = slices.Delete(d.added, ai, ai+1)
			ri--
		}
	}
	slices.SortFunc(d.updates, func(a, b listenerUpdate) int { return a.new.ListenerKey.compare(b.new.ListenerKey) })
}

// listeners plans the listener actions: removals, updates, additions.
func (p *planner) listeners(want, have []Listener) {
	d := diffListeners(want, have, false)
	d.pairPortChanges()
	for _, r := range d.removed {
		l := r[0]
		if len(r) > 1 {
			p.add(Action{Kind: ActionRemoveListener, Listener: &l}, "listener %s (listed %d times) is not a port of the service", l.ListenerKey.text(), len(r))
		} else {
			p.add(Action{Kind: ActionRemoveListener, Listener: &l}, "listener %s is not a port of the service", l.ListenerKey.text())
		}
	}
	for _, u := range d.updates {
		p.updateListener(u)
	}
	for _, a := range d.added {
		l := a
		p.add(Action{Kind: ActionAddListener, Listener: &l}, "service port %s (node port %d) has no listener", a.ListenerKey.text(), a.NodePort)
	}
}

// updateListener plans u, with the reason: a changed port, several
// listeners of one key, or a changed node port.
func (p *planner) updateListener(u listenerUpdate) {
	o, n := u.old[0], u.new
	switch {
	case o.ListenerKey != n.ListenerKey:
		p.add(Action{Kind: ActionUpdateListener, OldListener: &o, Listener: &n}, "service port changed: listener %s (node port %d%s) becomes %s (node port %d)", o.ListenerKey.text(), o.NodePort, listed(u.old), n.ListenerKey.text(), n.NodePort)
	case len(u.old) > 1:
		ports := make([]string, len(u.old))
		for i, l := range u.old {
			ports[i] = fmt.Sprint(l.NodePort)
		}
		p.add(Action{Kind: ActionUpdateListener, OldListener: &o, Listener: &n}, "listener %s is listed %d times (node ports %s); want one, with node port %d", n.ListenerKey.text(), len(u.old), strings.Join(ports, ", "), n.NodePort)
	default:
		if n.ID == "" {
			n.ID = o.ID // the same listener, changed in place
		}
		p.add(Action{Kind: ActionUpdateListener, OldListener: &o, Listener: &n}, "listener %s %s", n.ListenerKey.text(), listenerChanges(o, n))
	}
}

// listenerChanges says what differs between listener o, as reported, and
// n, as wanted, in what Plan compares (Listener.attrsEqual): "node port is
// 30080; want 30081", "app protocol is "" ; want "https"", "settings a, b
// changed", joined by "; ".
func listenerChanges(o, n Listener) string {
	var parts []string
	if !n.nodePortMatches(o) {
		parts = append(parts, fmt.Sprintf("node port is %d; want %d", o.NodePort, n.NodePort))
	}
	if o.AppProtocol != n.AppProtocol {
		parts = append(parts, fmt.Sprintf("app protocol is %q; want %q", o.AppProtocol, n.AppProtocol))
	}
	if keys := changedKeys(n.Settings, o.Settings); len(keys) > 0 {
		parts = append(parts, fmt.Sprintf("settings %s changed", strings.Join(keys, ", ")))
	}
	return strings.Join(parts, "; ")
}

// backends plans the backend actions: want and have are sorted by key and
// matched by it, and a matched pair is sent again only when key says the
// cloud sees the difference (BackendKey.changed). So no backend is ever both
// added and removed in one plan.
//
// A Driver may report one backend twice: the copies form one run of have,
// matched as one. A run without a wanted backend is removed once
// (RemoveBackends removes every entry of the key); a wanted backend that
// differs from any copy is added once (AddBackends replaces every entry of
// the key); a wanted backend is never removed.
func (p *planner) backends(l *Listener, want, have []Backend, key BackendKey) {
	var add, remove []Backend
	compare := key.compareFunc()
	same := func(a, b Backend) bool { return compare(a, b) == 0 }
	mergeSorted(want, runs(have, same), func(w Backend, run []Backend) int { return compare(w, run[0]) },
		func(w Backend) { add = append(add, w) },
		func(run []Backend) { remove = append(remove, run[0]) },
		func(w Backend, run []Backend) {
			if slices.ContainsFunc(run, func(h Backend) bool { return key.changed(w, h) }) {
				add = append(add, w)
			}
		})
	where := ""
	if l != nil {
		where = " of listener " + l.ListenerKey.text()
	}
	if len(add) > 0 {
		p.add(Action{Kind: ActionAddBackends, Listener: l, Backends: add}, "new or changed backends%s: %s", where, nodeList(add))
	}
	if len(remove) > 0 {
		p.add(Action{Kind: ActionRemoveBackends, Listener: l, Backends: remove}, "no longer backends%s: %s", where, nodeList(remove))
	}
}

// mergeSorted walks two slices sorted by cmp in one pass, calling onlyWant,
// onlyHave or both for each element or matching pair.
func mergeSorted[W, H any](want []W, have []H, cmp func(w W, h H) int, onlyWant func(W), onlyHave func(H), both func(w W, h H)) {
	i, j := 0, 0
	for i < len(want) && j < len(have) {
		switch c := cmp(want[i], have[j]); {
		case c < 0:
			onlyWant(want[i])
			i++
		case c > 0:
			onlyHave(have[j])
			j++
		default:
			both(want[i], have[j])
			i++
			j++
		}
	}
	for ; i < len(want); i++ {
		onlyWant(want[i])
	}
	for ; j < len(have); j++ {
		onlyHave(have[j])
	}
}

// nodeList names up to 5 backends: "node a", "nodes a, b and 3 more"
// (by node name, else provider ID or address, see Backend.label).
func nodeList(bs []Backend) string {
	const show = 5
	var names []string
	for i := 0; i < len(bs) && i < show; i++ {
		names = append(names, bs[i].label())
	}
	s := strings.Join(names, ", ")
	if len(bs) > show {
		s += fmt.Sprintf(" and %d more", len(bs)-show)
	}
	if len(bs) == 1 {
		return "node " + s
	}
	return "nodes " + s
}

func formatHC(h HealthCheck) string {
	if h == (HealthCheck{}) {
		return "none"
	}
	return fmt.Sprintf("%s :%d%s", h.Protocol, h.Port, h.Path)
}

func formatSA(s SessionAffinity) string {
	if !s.ClientIP {
		return string(v1.ServiceAffinityNone)
	}
	return fmt.Sprintf("ClientIP (%ds)", s.TimeoutSeconds)
}

// Apply returns a copy of lb with a applied, the reference semantics of
// each ActionKind; an in-memory Driver can store load balancers and call
// it. For ActionCreate it returns a copy of a.Create (lb is ignored and may
// be nil; the caller assigns the ID and Ingress). lb and a are only read.
// Its errors do not name the action or the load balancer: the Reconciler
// wraps what a Driver returns with both.
// ActionRemoveListener and ActionUpdateListener act on every listener with
// the key (lb may list several); ActionAddBackends and ActionRemoveBackends
// match backends by lb.Spec.BackendKey, and replace or remove every entry
// with a given backend's key. It returns an error (not wrapped) for a nil lb, a wrong target
// ID, a missing payload, adding a listener that exists, or removing or
// updating one that does not.
func Apply(lb *LoadBalancer, a Action) (*LoadBalancer, error) {
	if a.Kind == ActionCreate {
		if a.Create == nil {
			return nil, errors.New("the action's Create is nil: expected the load balancer to create")
		}
		out := a.Create.Clone()
		out.Spec.canonicalize()
		return out, nil
	}
	if lb == nil {
		return nil, errors.New("the load balancer does not exist")
	}
	if a.LoadBalancerID != lb.ID {
		return nil, fmt.Errorf("the action targets load balancer %q: expected %q, the one given", a.LoadBalancerID, lb.ID)
	}
	out := lb.Clone()
	if err := applyTo(out, a); err != nil {
		return nil, err
	}
	out.Spec.canonicalize() // masks, sorts and de-duplicates what the action set
	return out, nil
}

// applyTo applies a, of any kind but ActionCreate, to out, a copy of the
// load balancer that Apply owns, leaving it to Apply to canonicalize.
func applyTo(out *LoadBalancer, a Action) error {
	s := &out.Spec
	if a.Listener != nil && poolKinds[a.Kind] {
		return applyToPool(s, a)
	}
	switch a.Kind {
	case ActionUpdateTags:
		if out.Tags == nil {
			out.Tags = map[string]string{}
		}
		maps.Copy(out.Tags, a.Tags)
	case ActionUpdateFrontend:
		s.IPFamilies = slices.Clone(a.IPFamilies)
		s.RequestedIPs = slices.Clone(a.RequestedIPs)
	case ActionUpdateSettings:
		if s.Settings == nil {
			s.Settings = map[string]string{}
		}
		maps.Copy(s.Settings, a.Settings)
	case ActionUpdateHealthCheck:
		if a.HealthCheck == nil {
			return missingPayload(a.Kind, "HealthCheck")
		}
		s.HealthCheck = *a.HealthCheck
	case ActionUpdateSourceRanges:
		s.SourceRanges = append([]netip.Prefix{}, a.SourceRanges...)
	case ActionUpdateSessionAffinity:
		if a.SessionAffinity == nil {
			return missingPayload(a.Kind, "SessionAffinity")
		}
		s.SessionAffinity = *a.SessionAffinity
	case ActionAddListener, ActionRemoveListener, ActionUpdateListener:
		return applyListener(s, a)
	case ActionAddBackends, ActionRemoveBackends:
		applyBackends(s, a)
	case ActionUpdateBackendPool:
		s.BackendPool = a.BackendPool
	default:
		return fmt.Errorf("unknown action kind %q", a.Kind)
	}
	return nil
}

// poolKinds are the kinds that target a listener's pool when
// Action.Listener is set (Capabilities.ListenerPools).
var poolKinds = map[ActionKind]bool{
	ActionAddListenerPool: true, ActionRemoveListenerPool: true,
	ActionAddBackends: true, ActionRemoveBackends: true, ActionUpdateHealthCheck: true,
}

// applyToPool applies a pool action (poolKinds) to the pool of every
// listener of s with a.Listener's key (a Driver may have reported
// several): creating it empty, deleting it, adding or removing members
// (an addition also sets the listener's node port, the members' port), or
// setting its health monitor.
func applyToPool(s *Spec, a Action) error {
	key := a.Listener.ListenerKey
	found := false
	for i := range s.Listeners {
		l := &s.Listeners[i]
		if l.ListenerKey != key {
			continue
		}
		found = true
		switch {
		case a.Kind == ActionAddListenerPool && l.Pool != nil:
			return fmt.Errorf("listener %s already has a pool", key.text())
		case a.Kind == ActionAddListenerPool:
			l.Pool = &ListenerPool{}
			continue
		case l.Pool == nil:
			return fmt.Errorf("listener %s has no pool", key.text())
		}
		switch a.Kind {
		case ActionRemoveListenerPool:
			l.Pool = nil
		case ActionUpdateHealthCheck:
			if a.HealthCheck == nil {
				return missingPayload(a.Kind, "HealthCheck")
			}
			hc := *a.HealthCheck
			l.Pool.HealthCheck = &hc
		default:
			l.Pool.Backends = changeBackends(l.Pool.Backends, s.BackendKey, a)
			if a.Kind == ActionAddBackends {
				l.NodePort = a.Listener.NodePort
			}
		}
	}
	if !found {
		return fmt.Errorf("listener %s does not exist", key.text())
	}
	return nil
}

// missingPayload is Apply's error for an action of kind without its
// payload field.
func missingPayload(kind ActionKind, field string) error {
	return fmt.Errorf("the action's %s is nil: expected the payload of %s", field, kind)
}

// applyListener applies a listener action to s: a removal or an update
// first removes every listener of the old key (a Driver may have reported
// several), then an addition or an update adds a.Listener, whose key must
// then be free.
func applyListener(s *Spec, a Action) error {
	if a.Listener == nil {
		return missingPayload(a.Kind, "Listener")
	}
	if a.Kind != ActionAddListener {
		key := a.Listener.ListenerKey
		if a.Kind == ActionUpdateListener {
			if a.OldListener == nil {
				return missingPayload(a.Kind, "OldListener")
			}
			key = a.OldListener.ListenerKey
		}
		n := len(s.Listeners)
		s.Listeners = slices.DeleteFunc(s.Listeners, func(l Listener) bool { return l.ListenerKey == key })
		if len(s.Listeners) == n {
			return fmt.Errorf("listener %s does not exist", key.text())
		}
	}
	if a.Kind != ActionRemoveListener {
		if slices.ContainsFunc(s.Listeners, func(l Listener) bool { return l.ListenerKey == a.Listener.ListenerKey }) {
			return fmt.Errorf("listener %s already exists", a.Listener.ListenerKey.text())
		}
		s.Listeners = append(s.Listeners, *a.Listener)
	}
	return nil
}

// applyBackends applies a backend action to s by the load balancer's
// BackendKey: it removes every entry with the key of a given backend (a
// Driver may have reported one twice), then, to add, appends.
func applyBackends(s *Spec, a Action) {
	s.Backends = changeBackends(s.Backends, s.BackendKey, a)
}

// changeBackends returns bs with a's backends removed by key, then, to
// add, appended; bs is a copy the caller owns.
func changeBackends(bs []Backend, key BackendKey, a Action) []Backend {
	given := make(map[string]bool, len(a.Backends))
	for _, b := range a.Backends {
		given[key.id(b)] = true
	}
	bs = slices.DeleteFunc(bs, func(b Backend) bool { return given[key.id(b)] })
	if a.Kind == ActionAddBackends {
		bs = append(bs, a.Backends...)
	}
	return bs
}
