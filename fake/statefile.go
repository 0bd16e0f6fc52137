package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/routes"
)

// ErrStateFile is wrapped by every error about the shared state file
// (Config.StateFile): it cannot be locked, read or written, it is not a
// state file of this format, it is corrupt, it was removed after it was
// loaded, or it was created from a cloud-config with other pools. The error
// names the file. The fake never replaces a state file it cannot read. A
// cloud API call whose context ends while it waits for the file's lock
// (held by another process or Cloud, or by a call of this Cloud before it)
// fails with an ErrStateFile error that also wraps ctx.Err(), having
// changed nothing, and so does an admin endpoint request (503) at its
// deadline; the control surface, which takes no context, waits.
var ErrStateFile = errors.New("fake: state file")

// stateFormat is the "format" field of the state files the fake writes
// and the only one it reads: a file of any other format is rejected. (v1,
// an earlier draft, was never released.)
const stateFormat = "ccmkit.io/fake-state/v2"

// The shared state file (Config.StateFile).
//
// By default the cloud lives in the Cloud value: two cloud-controller-manager
// replicas each have their own, and a restarted one starts from the
// cloud-config again. A real cloud outlives the CCM and is shared by its
// replicas; with stateFile set, the fake's is too. Every process (or Cloud)
// built with the same stateFile and the same cloud-config is then one
// cloud: replicas fail over to the same load balancers, a restarted CCM
// finds what it created before it died, and a test can look at the cloud
// from its own process (fake.New with the same cloud-config, then Snapshot).
//
// How: the state is kept by one store (store.go), and every operation on
// it — cloud API calls and the control surface alike — runs as one
// transaction: take an exclusive flock(2) on <stateFile>.lock, reload the
// file if another process replaced it since this one last read or wrote it,
// run the operation, and, if it changed anything, write the whole state to
// a temporary file in the same directory and rename it over stateFile
// before unlocking. Readers never see a partial file, a process killed
// (SIGKILL) in the middle loses nothing it reported done and never leaves
// the lock held (the kernel drops it), and no update is lost. The file is
// not fsynced: it survives any process, not a crash of the machine. flock
// makes this Unix only (developed and tested on Linux); elsewhere New fails.
// A cloud API call waits for the lock at most until its context ends, then
// fails with an error wrapping ErrStateFile and ctx.Err(), having changed
// nothing; an admin endpoint request waits at most 20s (a 503, see "Admin
// endpoint"); the control surface, which takes no context, waits without a
// deadline.
// Without stateFile none of this runs, and the in-memory fake costs what it
// always did.
//
// When stateFile does not exist, New creates it from the seeded instances
// (Config.Instances, Options.Instances); when it exists, New loads it and the
// seeds are ignored, so a second replica or a restarted CCM never adds the
// instances again. A file that cannot be read — not JSON, another format,
// an unknown field, an invalid instance or route, a VIP outside its pool,
// pools other than the cloud-config's, or the file removed after it was
// loaded —
// is an error wrapping ErrStateFile that names the file and the problem
// (for a route breaking the rules of "Routes": the route and the field):
// from New, from every cloud API call and control-surface method with an
// error result, and as a 500 from the admin endpoint; Snapshot,
// InstanceByID and LoadBalancerFor log it and answer from the state last
// loaded. The fake never overwrites or recreates a file it cannot read;
// delete it to start over.
//
// Each process's admin endpoint shows the shared state. Faults, interceptor
// Funcs, call counters and the instance cache stay per process: they model
// the provider's cloud API client, not the cloud. So do the rate limit and
// the provisioning delay of new load balancers (each process enforces its
// own, from its cloud-config or admin endpoint); but each load balancer
// keeps in the file when it is ready, so every process agrees on that. A change another process
// made to an instance drops this process's instance cache at its next
// look-up, as a change made through its own control surface does.
//
// The file is JSON, one document, written indented:
//
//	{
//	  "format": "ccmkit.io/fake-state/v2",    // stateFormat
//	  "generation": 12,                        // +1 per saved change
//	  "cloud": {"instanceCIDRs": [...],        // must match the cloud-config (defaults applied):
//	            "loadBalancers": {"ipv4Pool", "ipv6Pool", "hostnameSuffix", "ipMode", "backends",
//	                              "backendPools"}},  // backendPools only when shared
//	  "nextInstance": 2, "nextLoadBalancer": 5, "routeRevision": 3, // ID counters, route table revision
//	  "nextBackendPool": 1,                    // only with shared backend pools
//	  "pools": [{"cidr": "198.18.0.0/15", "next": "198.18.0.6"}], // where each pool allocates next
//	  "instances": [Instance],                 // as in GET /instances
//	  "loadBalancers": [LoadBalancer],         // as in GET /loadbalancers, but with the ingress
//	                                           // it reports once ready, and no "provisioning"
//	  "backendPools": [{"id", "name", "tags", "ipFamilies", "backends", "backendKey"}],
//	                                           // only with shared backend pools
//	  "routes": [{"cluster", "name", "destinationCIDR", "targetNode",
//	              "targetNodeAddresses": [{"type", "address"}], "blackhole"}]
//	}
//
// A file is only ever replaced, never written in place; to edit one by hand,
// stop every process using it, or write a new file and rename it over the
// old one. A process killed while saving leaves a temporary file
// .<name>.tmp-* beside it, which nothing reads.

// stateFile is the file a store is shared through, and its lock file
// (<path>.lock). It is used within a store transaction (store.transact:
// the store's gate held), so it needs no lock of its own.
//
// Change detection: the state file is only ever replaced (a new file
// renamed over it), never written in place, and the file last loaded or
// saved stays open (cur), so its inode cannot be reused by a later file.
// The path therefore still names the same inode exactly when no process
// saved since; size and modification time are compared too, to notice a
// file edited in place by hand.
type stateFile struct {
	path  string
	cfg   Config   // the cloud-config (with defaults) the file must match
	lockf *os.File // open for the store's life (closed by its finalizer)

	cur        *os.File    // the file last loaded or saved; nil before the first
	info       fs.FileInfo // cur's stat at that moment
	generation uint64      // cur's generation
	stale      bool        // a save failed: reload even if the file is the same
}

// openStateFile opens (creating it if needed) the lock file of
// cfg.StateFile. The state file itself is read at the first lock.
func openStateFile(cfg Config) (*stateFile, error) {
	f := &stateFile{path: cfg.StateFile, cfg: cfg}
	lockPath := cfg.StateFile + ".lock"
	var err error
	if f.lockf, err = os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, f.errorf("opening the lock file: %w", err)
	}
	return f, nil
}

func (f *stateFile) errorf(format string, args ...any) error {
	return fmt.Errorf("%w %s: %w", ErrStateFile, f.path, fmt.Errorf(format, args...))
}

// loaded reports whether the file was loaded or saved (it exists).
func (f *stateFile) loaded() bool { return f.cur != nil }

// Polling of a held lock file by lock: the first retry after
// lockPollMin, each next one after twice the previous wait, at most
// lockPollMax.
const (
	lockPollMin = time.Millisecond
	lockPollMax = 16 * time.Millisecond
)

// lock takes the exclusive lock on the lock file (flock: held by this open
// file, released when it is unlocked or the process dies) and returns the
// function that releases it. While another process (or another store of
// this process) holds it, lock waits until ctx is done: with a ctx that is
// never done, in flock(2) itself; otherwise by retrying a non-blocking
// flock, so that no goroutine is left waiting, or holding the lock, after
// lock returns. A lock that is free is taken even when ctx is done. Errors
// wrap ErrStateFile, and ctx.Err() when ctx ended first.
func (f *stateFile) lock(ctx context.Context) (func(), error) {
	unlock := func() { _ = funlock(f.lockf) }
	if ctx.Done() == nil {
		if err := flock(f.lockf); err != nil {
			return nil, f.errorf("locking %s: %w", f.lockf.Name(), err)
		}
		return unlock, nil
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for wait := lockPollMin; ; wait = min(2*wait, lockPollMax) {
		if wait > lockPollMin && ctx.Err() != nil {
			// The timer and ctx may have been ready together: ctx wins,
			// so nothing runs after the caller's deadline.
			return nil, f.errorf("waiting for the lock %s, which another process or Cloud holds: %w", f.lockf.Name(), ctx.Err())
		}
		ok, err := tryFlock(f.lockf)
		switch {
		case err != nil:
			return nil, f.errorf("locking %s: %w", f.lockf.Name(), err)
		case ok:
			return unlock, nil
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return nil, f.errorf("waiting for the lock %s, which another process or Cloud holds: %w", f.lockf.Name(), ctx.Err())
		case <-timer.C:
		}
	}
}

// reload reads the file if it changed since it was last loaded or saved,
// and returns its state and true; it returns false when it did not change,
// or when it does not exist and was never loaded (a cloud not created yet).
// The lock must be held.
func (f *stateFile) reload() (cloudState, bool, error) {
	fi, err := os.Stat(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && f.cur == nil:
		return cloudState{}, false, nil
	case errors.Is(err, fs.ErrNotExist):
		return cloudState{}, false, f.errorf("removed after it was loaded (the fake never recreates a shared cloud): %w", err)
	case err != nil:
		return cloudState{}, false, f.errorf("%w", err)
	}
	if f.cur != nil && !f.stale && os.SameFile(fi, f.info) && fi.Size() == f.info.Size() && fi.ModTime().Equal(f.info.ModTime()) {
		return cloudState{}, false, nil
	}
	file, err := os.Open(f.path)
	if err != nil {
		return cloudState{}, false, f.errorf("%w", err)
	}
	data, err := io.ReadAll(file)
	if err == nil {
		fi, err = file.Stat()
	}
	if err != nil {
		file.Close()
		return cloudState{}, false, f.errorf("reading: %w", err)
	}
	st, gen, err := decodeState(data, f.cfg)
	if err != nil {
		file.Close()
		return cloudState{}, false, f.errorf("%w", err)
	}
	f.replace(file, fi, gen)
	return st, true, nil
}

// replace makes file, with stat fi and generation gen, the current file.
func (f *stateFile) replace(file *os.File, fi fs.FileInfo, gen uint64) {
	if f.cur != nil {
		f.cur.Close()
	}
	f.cur, f.info, f.generation, f.stale = file, fi, gen, false
}

// save writes st as the next generation: a temporary file in the same
// directory, renamed over the state file, so a reader (or a process killed
// mid-write) never sees a partial file. It does not fsync: the file
// survives the death of any process, not a crash of the machine. The lock
// must be held.
func (f *stateFile) save(st *cloudState) (err error) {
	defer func() {
		if err != nil {
			f.stale = true // memory holds a change the file does not
		}
	}()
	data, err := json.MarshalIndent(encodeState(st, f.cfg, f.generation+1), "", "  ")
	if err != nil {
		return f.errorf("encoding: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), "."+filepath.Base(f.path)+".tmp-*")
	if err != nil {
		return f.errorf("writing: %w", err)
	}
	_, err = tmp.Write(append(data, '\n'))
	var fi fs.FileInfo
	if err == nil {
		fi, err = tmp.Stat()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return f.errorf("writing: %w", err)
	}
	f.replace(tmp, fi, f.generation+1)
	return nil
}

// stateDoc is the JSON document of a state file (see the package
// documentation, "Shared state file").
type stateDoc struct {
	Format           string             `json:"format"`
	Generation       uint64             `json:"generation"`
	Cloud            stateCloud         `json:"cloud"`
	NextInstance     int                `json:"nextInstance"`
	NextLoadBalancer int                `json:"nextLoadBalancer"`
	NextBackendPool  int                `json:"nextBackendPool,omitempty"`
	RouteRevision    uint64             `json:"routeRevision"`
	Pools            []statePool        `json:"pools"`
	Instances        []stateInstance    `json:"instances"`
	LoadBalancers    []stateLB          `json:"loadBalancers"`
	BackendPools     []stateBackendPool `json:"backendPools,omitempty"`
	Routes           []stateRoute       `json:"routes"`
}

// stateBackendPool is a shared backend pool as a state file keeps it, its
// members' addresses as strings.
type stateBackendPool struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Tags       map[string]string `json:"tags"`
	IPFamilies []string          `json:"ipFamilies"`
	Backends   []stateBackend    `json:"backends"`
	BackendKey string            `json:"backendKey,omitempty"`
}

// stateCloud is the part of the cloud-config that defines the cloud: every
// process sharing a file must have the same.
type stateCloud struct {
	InstanceCIDRs []string      `json:"instanceCIDRs"`
	LoadBalancers stateLBConfig `json:"loadBalancers"`
}

// stateLBConfig is the part of LoadBalancerSection that defines the cloud
// (not the provisioning delay, which each process may change at run time:
// each load balancer keeps when it is ready). BackendPools is absent
// unless shared.
type stateLBConfig struct {
	IPv4Pool       string                `json:"ipv4Pool"`
	IPv6Pool       string                `json:"ipv6Pool"`
	HostnameSuffix string                `json:"hostnameSuffix,omitempty"`
	IPMode         v1.LoadBalancerIPMode `json:"ipMode,omitempty"`
	Backends       BackendMode           `json:"backends,omitempty"`
	BackendPools   BackendPoolMode       `json:"backendPools,omitempty"`
}

// statePool is an address pool's allocation cursor: the next address it
// tries.
type statePool struct {
	CIDR string `json:"cidr"`
	Next string `json:"next"`
}

// stateRoute is a route table entry, with the address types and the
// Blackhole flag that Route leaves out. routes.Entry.Extra is not stored
// (the fake keeps its index record there, rebuilt when a file is loaded).
type stateRoute struct {
	Cluster             string           `json:"cluster"`
	Name                string           `json:"name"`
	DestinationCIDR     string           `json:"destinationCIDR"`
	TargetNode          string           `json:"targetNode"`
	TargetNodeAddresses []v1.NodeAddress `json:"targetNodeAddresses,omitempty"`
	Blackhole           bool             `json:"blackhole,omitempty"`
}

func cloudOf(cfg Config) stateCloud {
	lb := cfg.LoadBalancers
	out := stateCloud{InstanceCIDRs: slices.Clone(cfg.InstanceCIDRs), LoadBalancers: stateLBConfig{
		IPv4Pool: lb.IPv4Pool, IPv6Pool: lb.IPv6Pool, HostnameSuffix: lb.HostnameSuffix, IPMode: lb.IPMode, Backends: lb.Backends,
	}}
	if lb.BackendPools == BackendPoolsShared {
		out.LoadBalancers.BackendPools = lb.BackendPools // absent otherwise, as in files written before it
	}
	return out
}

// encodeState returns st as the document of generation gen.
func encodeState(st *cloudState, cfg Config, gen uint64) *stateDoc {
	doc := &stateDoc{
		Format: stateFormat, Generation: gen, Cloud: cloudOf(cfg),
		NextInstance: st.nextInstance, NextLoadBalancer: st.nextLB, NextBackendPool: st.nextBPool, RouteRevision: st.routeRev,
		Instances: []stateInstance{}, LoadBalancers: []stateLB{}, Routes: []stateRoute{},
	}
	for _, p := range st.sortedBackendPools() {
		doc.BackendPools = append(doc.BackendPools, storedBackendPool(p))
	}
	for _, in := range st.appendInstances(nil) {
		doc.Instances = append(doc.Instances, stateInstance{Instance: in, State: stateNames[in.State]})
	}
	for _, r := range st.sortedLoadBalancers() {
		doc.LoadBalancers = append(doc.LoadBalancers, storedLoadBalancer(r))
	}
	for _, p := range st.pools() {
		doc.Pools = append(doc.Pools, statePool{CIDR: p.prefix.String(), Next: p.next.String()})
	}
	for _, e := range st.routes {
		doc.Routes = append(doc.Routes, stateRoute{
			Cluster: e.Cluster, Name: e.Name, DestinationCIDR: e.DestinationCIDR, TargetNode: string(e.TargetNode),
			TargetNodeAddresses: e.TargetNodeAddresses, Blackhole: e.Blackhole,
		})
	}
	return doc
}

// pools returns the instance pools, then the IPv4 and IPv6 load-balancer
// pools.
func (st *cloudState) pools() []*pool {
	return append(slices.Clone(st.instPools), st.lbPools[true], st.lbPools[false])
}

// decodeState parses a state file strictly and rebuilds the state it
// holds, checking it against cfg (with defaults). Errors name the field.
// Its steps: parseStateDoc (the document and its format), checkSameCloud
// (the cloud-config it was written with), then loadDoc (the state).
func decodeState(data []byte, cfg Config) (cloudState, uint64, error) {
	doc, err := parseStateDoc(data)
	if err != nil {
		return cloudState{}, 0, err
	}
	if err := checkSameCloud(doc.Cloud, cfg); err != nil {
		return cloudState{}, 0, err
	}
	st, err := emptyState(cfg)
	if err != nil {
		return cloudState{}, 0, err
	}
	if err := st.loadDoc(&doc); err != nil {
		return cloudState{}, 0, err
	}
	return st, doc.Generation, nil
}

// parseStateDoc decodes data strictly (an unknown field, or data after
// the document, is an error) as a document of format stateFormat.
func parseStateDoc(data []byte) (stateDoc, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return stateDoc{}, errors.New("empty: expected a JSON document written by the fake (format " + stateFormat + ")")
	}
	var doc stateDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "" {
			// encoding/json names the Go type it wanted: say what.
			return stateDoc{}, fmt.Errorf("not a valid state file: a JSON %s: expected a JSON object written by the fake (format %s)", typeErr.Value, stateFormat)
		}
		return stateDoc{}, fmt.Errorf("not a valid state file: %w", err)
	}
	if dec.More() {
		return stateDoc{}, errors.New("not a valid state file: data after the JSON document")
	}
	if doc.Format != stateFormat {
		return stateDoc{}, fmt.Errorf("format %q: expected %q", doc.Format, stateFormat)
	}
	return doc, nil
}

// checkSameCloud returns an error naming the first difference between
// got, the cloud a state file was written for, and the cloud of cfg (with
// defaults): every process sharing a file must have the same.
func checkSameCloud(got stateCloud, cfg Config) error {
	want := cloudOf(cfg)
	if !slices.Equal(got.InstanceCIDRs, want.InstanceCIDRs) {
		return fmt.Errorf("cloud.instanceCIDRs %v, but the cloud-config has instanceCIDRs %v: expected the same cloud-config in every process sharing a state file", got.InstanceCIDRs, want.InstanceCIDRs)
	}
	if got.LoadBalancers != want.LoadBalancers {
		return fmt.Errorf("cloud.loadBalancers %+v, but the cloud-config has loadBalancers %+v (with defaults): expected the same cloud-config in every process sharing a state file", got.LoadBalancers, want.LoadBalancers)
	}
	return nil
}

// loadDoc fills st, an empty state of the document's cloud, with what doc
// holds: counters, pool cursors, instances, load balancers and routes, in
// that order, stopping at the first that is invalid (the error names it).
func (st *cloudState) loadDoc(doc *stateDoc) error {
	if doc.NextInstance < 0 || doc.NextLoadBalancer < 0 || doc.NextBackendPool < 0 {
		return fmt.Errorf("nextInstance %d, nextLoadBalancer %d, nextBackendPool %d: expected counters of zero or more", doc.NextInstance, doc.NextLoadBalancer, doc.NextBackendPool)
	}
	st.nextInstance, st.nextLB, st.nextBPool = doc.NextInstance, doc.NextLoadBalancer, doc.NextBackendPool
	for i, sp := range doc.Pools {
		if err := st.setPoolNext(sp); err != nil {
			return fmt.Errorf("pools[%d]: %w", i, err)
		}
	}
	for i, in := range doc.Instances {
		if err := st.loadInstance(field.NewPath("instances").Index(i), &in); err != nil {
			return err
		}
	}
	for i, v := range doc.BackendPools {
		if err := st.loadBackendPool(v); err != nil {
			return fmt.Errorf("backendPools[%d] (id %q): %w", i, v.ID, err)
		}
	}
	for i, v := range doc.LoadBalancers {
		if err := st.loadLoadBalancer(v); err != nil {
			return fmt.Errorf("loadBalancers[%d] (id %q): %w", i, v.ID, err)
		}
	}
	var table []routes.Entry
	for _, r := range doc.Routes {
		table = append(table, routes.Entry{
			Cluster: r.Cluster, Name: r.Name, DestinationCIDR: r.DestinationCIDR, TargetNode: types.NodeName(r.TargetNode),
			TargetNodeAddresses: r.TargetNodeAddresses, Blackhole: r.Blackhole,
		})
	}
	// The route table's rules, as for every other way into it: a file
	// that breaks them is not loaded at all.
	if err := st.setRoutes(table, tablePath); err != nil {
		return err
	}
	st.routeRev = doc.RouteRevision // the file's, not setRoutes' count
	return nil
}

func (st *cloudState) setPoolNext(sp statePool) error {
	for _, p := range st.pools() {
		if p.prefix.String() != sp.CIDR {
			continue
		}
		a, err := netip.ParseAddr(sp.Next)
		if err != nil || !p.contains(a) {
			return fmt.Errorf("next %q: expected an allocatable address of %s", sp.Next, sp.CIDR)
		}
		p.next = a
		return nil
	}
	return fmt.Errorf("cidr %q: expected one of the configured pools", sp.CIDR)
}

// loadInstance adds a stored instance, taking its internal addresses;
// path names it in errors.
func (st *cloudState) loadInstance(path *field.Path, stored *stateInstance) error {
	in := stored.Instance
	errs := validateInstance(path, in)
	if stored.State != "" {
		if err := in.State.UnmarshalText([]byte(stored.State)); err != nil {
			errs = append(errs, field.NotSupported(path.Child("state"), clipValue(stored.State), stateNames))
		}
	}
	if len(errs) > 0 {
		return errs.ToAggregate()
	}
	switch {
	case in.ID == "":
		return fmt.Errorf("%s: expected the instance ID", path.Child("id"))
	case stored.State == "":
		return fmt.Errorf("%s: expected running, stopped or terminated", path.Child("state"))
	case st.instances[in.ID] != nil:
		return fmt.Errorf("%s %q: expected each instance ID once", path.Child("id"), in.ID)
	}
	for j, s := range in.InternalIPs {
		ip := netip.MustParseAddr(s) // validated
		if owner, taken := st.instIPs[ip]; taken {
			return fmt.Errorf("%s %s: also the address of instance %q: expected distinct addresses", path.Child("internalIPs").Index(j), ip, owner)
		}
		for _, p := range st.instPools {
			if p.contains(ip) {
				_ = p.take(ip) // free: instIPs had no owner
			}
		}
		st.instIPs[ip] = in.ID
	}
	in = in.clone()
	st.instances[in.ID] = &in
	st.instByName.add(in.Name, in.ID)
	return nil
}

// loadLoadBalancer adds a stored load balancer, taking its VIPs.
func (st *cloudState) loadLoadBalancer(v stateLB) error {
	if v.ID == "" || st.lbs[v.ID] != nil {
		return fmt.Errorf("id %q: expected a load balancer ID, each once", v.ID)
	}
	if v.BackendPool != "" && st.bpools[v.BackendPool] == nil {
		return fmt.Errorf("backendPool %q: expected the ID of a backend pool of the file", v.BackendPool)
	}
	rec, err := v.record()
	if err != nil {
		return err
	}
	for j, ip := range rec.vips {
		p := st.lbPools[ip.Is4()]
		if !p.contains(ip) {
			return fmt.Errorf("vips[%d] %s: expected an address of the pool %s", j, ip, p.prefix)
		}
		if err := p.take(ip); err != nil {
			return fmt.Errorf("vips[%d]: %w: expected each VIP once", j, err)
		}
	}
	st.lbs[v.ID] = rec
	st.indexLB(rec.lb)
	return nil
}

// stateInstance is an instance as a state file keeps it: its state is
// read as text, so that a missing or unknown state is an error naming the
// field.
type stateInstance struct {
	Instance
	State string `json:"state"` // hides Instance.State
}

// stateLB is a load balancer as a state file keeps it (format v2):
// with the ingress it reports once ready, and addresses and CIDRs as
// strings.
type stateLB struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	Tags            map[string]string `json:"tags"`
	IPFamilies      []string          `json:"ipFamilies"`
	RequestedIPs    []string          `json:"requestedIPs,omitempty"`
	Listeners       []stateListener   `json:"listeners"`
	Backends        []stateBackend    `json:"backends"`
	HealthCheck     stateHealthCheck  `json:"healthCheck"`
	SourceRanges    []string          `json:"sourceRanges"`
	SessionAffinity stateAffinity     `json:"sessionAffinity"`
	Settings        map[string]string `json:"settings,omitempty"`
	BackendKey      string            `json:"backendKey,omitempty"`
	BackendPool     string            `json:"backendPool,omitempty"`
	VIPs            []string          `json:"vips"`
	Ingress         []stateIngress    `json:"ingress"`
	// Provisioning is always false in a state file, where ReadyAt decides.
	Provisioning bool      `json:"provisioning,omitempty"`
	ReadyAt      time.Time `json:"readyAt,omitzero"`
}

type stateListener struct {
	Family   string `json:"family"`
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
	NodePort int32  `json:"nodePort"`
}

type stateBackend struct {
	NodeName   string `json:"nodeName,omitempty"`
	ProviderID string `json:"providerID"`
	IPv4       string `json:"ipv4,omitempty"`
	IPv6       string `json:"ipv6,omitempty"`
}

type stateHealthCheck struct {
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
	Path     string `json:"path"`
}

type stateAffinity struct {
	ClientIP       bool  `json:"clientIP"`
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

type stateIngress struct {
	IP       string `json:"ip,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	IPMode   string `json:"ipMode,omitempty"`
}

// storedLoadBalancer returns r in its state-file form.
func storedLoadBalancer(r *lbRecord) stateLB {
	lb, spec := r.lb, r.lb.Spec
	out := stateLB{
		ID: lb.ID, Name: lb.Name, Tags: map[string]string{}, BackendKey: string(spec.BackendKey), BackendPool: spec.BackendPool, ReadyAt: r.readyAt,
		IPFamilies: []string{}, Listeners: []stateListener{}, Backends: []stateBackend{}, SourceRanges: []string{},
		VIPs: []string{}, Ingress: []stateIngress{},
		HealthCheck:     stateHealthCheck{Protocol: string(spec.HealthCheck.Protocol), Port: spec.HealthCheck.Port, Path: spec.HealthCheck.Path},
		SessionAffinity: stateAffinity{ClientIP: spec.SessionAffinity.ClientIP, TimeoutSeconds: spec.SessionAffinity.TimeoutSeconds},
	}
	maps.Copy(out.Tags, lb.Tags)
	for _, f := range spec.IPFamilies {
		out.IPFamilies = append(out.IPFamilies, string(f))
	}
	for _, ip := range spec.RequestedIPs {
		out.RequestedIPs = append(out.RequestedIPs, ip.String())
	}
	for _, l := range spec.Listeners {
		out.Listeners = append(out.Listeners, stateListener{Family: string(l.Family), Protocol: string(l.Protocol), Port: l.Port, NodePort: l.NodePort})
	}
	out.Backends = storedBackends(spec.Backends)
	for _, p := range spec.SourceRanges {
		out.SourceRanges = append(out.SourceRanges, p.String())
	}
	if len(spec.Settings) > 0 {
		out.Settings = maps.Clone(spec.Settings)
	}
	for _, ip := range r.vips {
		out.VIPs = append(out.VIPs, ip.String())
	}
	for _, in := range lb.Ingress {
		out.Ingress = append(out.Ingress, stateIngress{IP: in.IP, Hostname: in.Hostname, IPMode: string(in.IPMode)})
	}
	return out
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// record parses a load balancer of a state file (storedLoadBalancer) back
// into its stored form. Empty lists become nil. Every problem found is
// reported, joined in field order.
func (v stateLB) record() (*lbRecord, error) {
	var d lbDecoder
	lb := &loadbalancer.LoadBalancer{ID: v.ID, Name: v.Name, Tags: maps.Clone(v.Tags)}
	v.decodeSpec(&d, &lb.Spec)
	rec := &lbRecord{lb: lb}
	for i, str := range v.VIPs {
		rec.vips = append(rec.vips, d.addr("vips", i, str))
	}
	for _, in := range v.Ingress {
		lb.Ingress = append(lb.Ingress, loadbalancer.Ingress{IP: in.IP, Hostname: in.Hostname, IPMode: v1.LoadBalancerIPMode(in.IPMode)})
	}
	lb.Spec.BackendKey = d.backendKey(v.BackendKey)
	rec.readyAt = v.ReadyAt
	if v.Provisioning {
		d.errs = append(d.errs, errors.New("provisioning true: expected it absent in a state file, where readyAt says when the load balancer is ready"))
	}
	if err := errors.Join(d.errs...); err != nil {
		return nil, err
	}
	return rec, nil
}

// decodeSpec parses the Spec of v into s (all but its BackendKey, which
// record parses after the VIPs, to report problems in field order), noting
// problems in d.
func (v stateLB) decodeSpec(d *lbDecoder, s *loadbalancer.Spec) {
	for _, f := range v.IPFamilies {
		s.IPFamilies = append(s.IPFamilies, v1.IPFamily(f))
	}
	for i, str := range v.RequestedIPs {
		s.RequestedIPs = append(s.RequestedIPs, d.addr("requestedIPs", i, str))
	}
	for _, l := range v.Listeners {
		s.Listeners = append(s.Listeners, loadbalancer.Listener{
			ListenerKey: loadbalancer.ListenerKey{Family: v1.IPFamily(l.Family), Protocol: v1.Protocol(l.Protocol), Port: l.Port},
			NodePort:    l.NodePort,
		})
	}
	s.Backends = d.backends(v.Backends)
	s.BackendPool = v.BackendPool
	s.HealthCheck = loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckProtocol(v.HealthCheck.Protocol), Port: v.HealthCheck.Port, Path: v.HealthCheck.Path}
	for i, str := range v.SourceRanges {
		p, err := netip.ParsePrefix(str)
		if err != nil {
			d.errs = append(d.errs, fmt.Errorf("sourceRanges[%d] %q: expected a CIDR", i, str))
		}
		s.SourceRanges = append(s.SourceRanges, p)
	}
	s.SessionAffinity = loadbalancer.SessionAffinity{ClientIP: v.SessionAffinity.ClientIP, TimeoutSeconds: v.SessionAffinity.TimeoutSeconds}
	if len(v.Settings) > 0 {
		s.Settings = maps.Clone(v.Settings)
	}
}

// lbDecoder parses the text fields of one stateLB, noting each problem in
// errs (naming the field, the value and what was expected) and going on,
// so that record reports them all. The zero value is ready to use.
type lbDecoder struct{ errs []error }

// addr parses str, element i of the list name, as an IP address; the zero
// Addr when it is not one.
func (d *lbDecoder) addr(name string, i int, str string) netip.Addr {
	a, err := netip.ParseAddr(str)
	if err != nil {
		d.errs = append(d.errs, fmt.Errorf("%s[%d] %q: expected an IP address", name, i, str))
	}
	return a
}

// optAddr is addr for an optional address: empty is the zero Addr.
func (d *lbDecoder) optAddr(name string, i int, str string) netip.Addr {
	if str == "" {
		return netip.Addr{}
	}
	return d.addr(name, i, str)
}

// backendKey parses a load balancer's backend key; "" (by Node name) when
// it is not one.
func (d *lbDecoder) backendKey(str string) loadbalancer.BackendKey {
	switch k := loadbalancer.BackendKey(str); k {
	case loadbalancer.BackendKeyNodeName, loadbalancer.BackendKeyProviderID, loadbalancer.BackendKeyAddress:
		return k
	}
	d.errs = append(d.errs, fmt.Errorf("backendKey %q: expected \"\", %q or %q", str, loadbalancer.BackendKeyProviderID, loadbalancer.BackendKeyAddress))
	return ""
}

// storedBackends returns bs in their state-file form (an empty list for
// none).
func storedBackends(bs []loadbalancer.Backend) []stateBackend {
	out := make([]stateBackend, 0, len(bs))
	for _, b := range bs {
		out = append(out, stateBackend{NodeName: b.NodeName, ProviderID: b.ProviderID, IPv4: addrString(b.IPv4), IPv6: addrString(b.IPv6)})
	}
	return out
}

// backends parses the backends of a state file (storedBackends).
func (d *lbDecoder) backends(bs []stateBackend) []loadbalancer.Backend {
	var out []loadbalancer.Backend
	for i, b := range bs {
		out = append(out, loadbalancer.Backend{
			NodeName: b.NodeName, ProviderID: b.ProviderID,
			IPv4: d.optAddr("backends.ipv4", i, b.IPv4), IPv6: d.optAddr("backends.ipv6", i, b.IPv6),
		})
	}
	return out
}

// storedBackendPool returns p in its state-file form.
func storedBackendPool(p *loadbalancer.Pool) stateBackendPool {
	out := stateBackendPool{ID: p.ID, Name: p.Name, Tags: map[string]string{}, IPFamilies: []string{},
		Backends: storedBackends(p.Spec.Backends), BackendKey: string(p.Spec.BackendKey)}
	maps.Copy(out.Tags, p.Tags)
	for _, f := range p.Spec.IPFamilies {
		out.IPFamilies = append(out.IPFamilies, string(f))
	}
	return out
}

// loadBackendPool adds a stored backend pool (storedBackendPool).
func (st *cloudState) loadBackendPool(v stateBackendPool) error {
	if v.ID == "" || st.bpools[v.ID] != nil {
		return fmt.Errorf("id %q: expected a backend pool ID, each once", v.ID)
	}
	var d lbDecoder
	p := &loadbalancer.Pool{ID: v.ID, Name: v.Name, Tags: maps.Clone(v.Tags)}
	for _, f := range v.IPFamilies {
		p.Spec.IPFamilies = append(p.Spec.IPFamilies, v1.IPFamily(f))
	}
	p.Spec.Backends = d.backends(v.Backends)
	p.Spec.BackendKey = d.backendKey(v.BackendKey)
	if err := errors.Join(d.errs...); err != nil {
		return err
	}
	st.bpools[v.ID] = p
	return nil
}
