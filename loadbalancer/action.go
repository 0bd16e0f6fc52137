package loadbalancer

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// ActionKind is the type of an Action. Its value is readable in logs.
type ActionKind string

// The action kinds, in the order Plan emits them. Every kind is one write
// to the cloud.
const (
	// ActionCreate creates the load balancer described by Action.Create
	// (Name, Tags, Spec). Plan emits it alone, when there is no actual
	// load balancer.
	ActionCreate ActionKind = "CreateLoadBalancer"
	// ActionUpdateTags sets Action.Tags (the ccmkit ownership tags) on the
	// load balancer, leaving every other tag as it is. Emitted on adoption.
	ActionUpdateTags ActionKind = "UpdateTags"
	// ActionUpdateFrontend sets Action.IPFamilies and Action.RequestedIPs.
	ActionUpdateFrontend ActionKind = "UpdateFrontend"
	// ActionUpdateSettings sets the provider settings in Action.Settings,
	// leaving other settings as they are.
	ActionUpdateSettings ActionKind = "UpdateSettings"
	// ActionUpdateHealthCheck sets Action.HealthCheck. With
	// Action.Listener set (Capabilities.ListenerPools) it sets the health
	// monitor of that listener's pool, creating it when
	// Action.Listener.Pool.HealthCheck is nil.
	ActionUpdateHealthCheck ActionKind = "UpdateHealthCheck"
	// ActionUpdateSourceRanges sets Action.SourceRanges (the full list).
	ActionUpdateSourceRanges ActionKind = "UpdateSourceRanges"
	// ActionUpdateSessionAffinity sets Action.SessionAffinity.
	ActionUpdateSessionAffinity ActionKind = "UpdateSessionAffinity"
	// ActionRemoveListener removes the listener Action.Listener (by key):
	// every listener with that key, if the cloud holds several.
	ActionRemoveListener ActionKind = "RemoveListener"
	// ActionUpdateListener replaces the listener Action.OldListener (by
	// key; every listener with that key, if the cloud holds several) with
	// the one listener Action.Listener: the node port, or the port of a
	// listener of the same family and protocol, changed, or the cloud held
	// several listeners with one key.
	ActionUpdateListener ActionKind = "UpdateListener"
	// ActionAddListener adds Action.Listener. Under
	// Capabilities.ListenerPools it is the listener alone (its Pool is
	// nil): its pool, members and health check follow as actions of their
	// own, one cloud object each.
	ActionAddListener ActionKind = "AddListener"
	// ActionAddListenerPool creates the pool of the listener
	// Action.Listener (as the Driver reported it, without a pool; for a
	// listener the same call just added, the Driver finds the cloud ID it
	// reported in Action.Current), empty:
	// no members, no health check (Capabilities.ListenerPools only). A
	// Driver whose cloud cannot make an empty pool may create it with
	// Action.Pool's members and health check, and report them.
	ActionAddListenerPool ActionKind = "AddListenerPool"
	// ActionRemoveListenerPool deletes the pool of the listener
	// Action.Listener, with its members and health check, leaving the
	// listener (Capabilities.ListenerPools only). Plan emits it before the
	// ActionRemoveListener of a listener that has a pool.
	ActionRemoveListenerPool ActionKind = "RemoveListenerPool"
	// ActionAddBackends adds Action.Backends, the desired backends (every
	// field set, whatever the BackendKey); a backend whose key (see
	// BackendKey) is already present is replaced: under the default key,
	// its address or provider ID changed. With Action.Listener set
	// (Capabilities.ListenerPools) it adds them to that listener's pool
	// only; the members' port is Action.Listener.NodePort.
	ActionAddBackends ActionKind = "AddBackends"
	// ActionUpdateBackendPool makes the load balancer send traffic to the
	// shared backend pool whose ID is Action.BackendPool (see Pool), or to
	// none when it is empty, leaving its own backends as they are. The
	// pool exists: the Reconciler ensures it first.
	ActionUpdateBackendPool ActionKind = "UpdateBackendPool"
	// ActionRemoveBackends removes Action.Backends, as the Driver reported
	// them, by key (see BackendKey). With Action.Listener set
	// (Capabilities.ListenerPools) it removes them from that listener's
	// pool only.
	ActionRemoveBackends ActionKind = "RemoveBackends"
)

// Action is one write to the cloud. Kind says which payload field is set;
// the others are zero. Actions produced by Plan share no memory with its
// arguments' maps and slices except where documented, and a Driver must not
// modify them.
type Action struct {
	Kind ActionKind
	// LoadBalancerID is the target (empty for ActionCreate).
	LoadBalancerID string
	// Reason says in words why the action is needed, for logs and events.
	Reason string

	// Create is the desired load balancer (ActionCreate).
	Create *LoadBalancer
	// Tags are the tags to set (ActionUpdateTags).
	Tags map[string]string
	// IPFamilies and RequestedIPs are the front end (ActionUpdateFrontend).
	IPFamilies   []v1.IPFamily
	RequestedIPs []netip.Addr
	// Settings are the provider settings to set (ActionUpdateSettings).
	Settings map[string]string
	// HealthCheck is the new health check (ActionUpdateHealthCheck).
	HealthCheck *HealthCheck
	// SourceRanges is the new list (ActionUpdateSourceRanges).
	SourceRanges []netip.Prefix
	// SessionAffinity is the new affinity (ActionUpdateSessionAffinity).
	SessionAffinity *SessionAffinity
	// Listener is the listener to add or remove, or the new value
	// (ActionAddListener, ActionRemoveListener, ActionUpdateListener); the
	// listener whose pool the action targets, as the Driver reported it
	// (ActionAddListenerPool, ActionRemoveListenerPool, and
	// ActionAddBackends, ActionRemoveBackends and ActionUpdateHealthCheck
	// under Capabilities.ListenerPools); nil for a load-balancer-wide
	// backend or health-check action.
	Listener *Listener
	// OldListener is the listener being replaced (ActionUpdateListener).
	OldListener *Listener
	// Backends are the backends to add or remove, sorted by the desired
	// BackendKey (ActionAddBackends, ActionRemoveBackends).
	Backends []Backend
	// BackendPool is the ID of the pool to reference, empty for none
	// (ActionUpdateBackendPool).
	BackendPool string
	// Pool is the pool the listener should end with: its desired members
	// and health check (ActionAddListenerPool). Plan's next actions add
	// them; see ActionAddListenerPool.
	Pool *ListenerPool

	// Current is the load balancer as the Reconciler knows it just before
	// this action: what Find reported, with the earlier actions of the
	// call applied. The Reconciler sets it for every kind but
	// ActionCreate; Plan leaves it nil. It is read-only and shared: a
	// Driver that must report what it created (a new listener's or pool's
	// cloud ID) returns a copy, e.g. loadbalancer.Apply(a.Current, a) with
	// the IDs set.
	Current *LoadBalancer
}

// String returns the kind, target and reason, for logs.
func (a Action) String() string {
	return fmt.Sprintf("%s %s: %s", a.Kind, a.LoadBalancerID, a.Reason)
}
