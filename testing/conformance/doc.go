// Package conformance is the shared conformance suite for implementations
// of k8s.io/cloud-provider's cloudprovider.Interface: it checks, in go test
// and without a cluster, the contracts the upstream cloud-controller-manager
// controllers (k8s.io/cloud-provider@v0.37.2/controllers: service, cloud
// node, cloud node lifecycle and route) rely on.
//
// It follows testing/fstest and testing/slogtest: one table of rules and two
// entry points over it. [Run] runs each rule as a subtest named by its ID;
// [Check] runs them all and returns every failure joined with errors.Join,
// each a [*Failure] naming its rule; [Evaluate] returns each rule's
// [Outcome] (pass, fail with messages, skip with the reason).
//
// It is not an end-to-end test and not a load test: it drives the provider
// directly and through the upstream controllers over a fake clientset, one
// rule at a time, against a cloud the Target hooks can inspect. A real
// control plane is testing/e2e's job; the cloud-call budget at scale is
// measured by benchmarks, not by the suite.
//
// A rule is an upstream contract (what the upstream code it cites needs,
// nothing stricter) or a ccmkit recommendation (a stricter policy, marked
// "[recommendation]" in its failures; Config.UpstreamOnly skips them all).
// Config.Skip skips a rule by ID, or one case of a table-driven rule as
// "RULE/case" (Rule.Cases).
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Config{
//			NewTarget: func(ctx context.Context) (*conformance.Target, error) {
//				cloud, nodes := newTestCloud() // a fresh provider and its nodes
//				return &conformance.Target{Cloud: cloud, Nodes: nodes}, nil
//			},
//			Claims: conformance.Claims{LoadBalancer: true, InstancesV2: true},
//		})
//	}
//
// # What is checked
//
// Direct-call rules call the provider the way the controllers do and check
// the answers: accessors, registration, load-balancer idempotency,
// existence, deletion, backends, ports, source ranges, health checks,
// unsupported features, cross-cluster isolation and concurrency; instance
// existence, shutdown, metadata and addresses; route round trips, names and
// deletion; sentinel errors, unmodified arguments and cancelled contexts.
// Controller rules (CTRL-*) run the real upstream controllers against a
// client-go fake clientset and the provider, with periods of tens of
// milliseconds, and wait (at most Config.Timeout) for the outcome: an
// initialized Node, a deleted or tainted Node, a Service with its finalizer
// and ingress, routes that appear, stay and go.
//
// # Independence and skipping
//
// Every rule gets a fresh provider from Config.NewTarget and initializes it
// as the cloud-controller-manager does (Initialize, then SetInformers for a
// cloudprovider.InformerUser). A rule whose capability, feature or hook is
// not available is skipped with the reason; so is a rule whose precondition
// (a first EnsureLoadBalancer, a first InstanceMetadata, a working accessor)
// fails, because the rule that owns that precondition reports it: one
// mistake, one failing rule.
//
// # What Initialize gets
//
// Initialize receives a cloudprovider.ControllerClientBuilder whose clients
// are real clientsets (kubernetes.NewForConfig) over HTTP, served in-process
// on 127.0.0.1 from the rule's fake clientset: the very objects the suite's
// controllers see (Nodes, Services, ConfigMaps, Events…), with watches, so
// a provider's CoreV1().RESTClient(), ListWatch and informers work, and see
// every change the suite makes. Config(name) gives that server's rest.Config
// (user agent ".../name") to build other clients: dynamic, discovery,
// informer factories. Every kind of client-go's scheme is served, with its
// status subresource; not deletecollection, other subresources or
// watch-list (informers fall back to list and watch). The suite's own
// controllers use the fake clientset directly; the server stops when the
// rule ends, after the stop channel closes. A provider whose Initialize
// finishes its set-up in a goroutine sets Target.Ready to wait for it. A
// LoadBalancer whose UpdateLoadBalancer writes behind (a
// loadbalancer.Reconciler with Options.CoalesceWindow) implements Flusher,
// and the rules flush it before they inspect the cloud.
//
// Hooks arrange and inspect cloud state that the cloudprovider interfaces
// cannot: stop, start, terminate or create an instance, list what the
// provider owns (to find leaks), count cloud writes, simulate an outage,
// read a load balancer's backends, listeners, source ranges and health
// check, and remove part of a load balancer (Hooks.Damage). The richer the
// hooks, the more rules run. Claims.AppProtocols and Config.PortSetting
// select the checks of what a listener serves and holds per port
// (LB-PER-PORT).
//
// # A realistic cloud: retries, caches, two clusters
//
// The suite passes a correct provider over a cloud that is asynchronous,
// throttled and cached, as a real one is.
//
// Retries. A direct call that fails with an error for which errors.As finds
// an *api.RetryError (k8s.io/cloud-provider/api: "not yet, retry after D",
// such as loadbalancer.Reconciler's answer while a load balancer has no
// address, or a throttled cloud) is made again after D, as the controllers
// do: controllers/service/controller.go processNextServiceItem requeues the
// Service after RetryAfter when EnsureLoadBalancer returned one (and with
// backoff on any other error), the node lifecycle controller asks again
// every period (controllers/nodelifecycle/node_lifecycle_controller.go
// MonitorNodes), the node controller requeues the Node
// (controllers/node/node_controller.go processNextWorkItem), the route
// controller reconciles again (controllers/route/route_controller.go
// reconcile). The suite waits D clamped to [10ms, 1s] and gives up after
// Config.Timeout; any other error is what it always was. Only the outage
// rules and CTX-CANCELLED take a single answer, where an api.RetryError is
// an error as asked.
//
// Caches. Hooks.StopInstance, StartInstance, TerminateInstance,
// CreateInstance and Damage change the cloud behind the provider's back;
// the suite calls Hooks.CloudChanged right after each, and a provider that
// answers from caches drops them there (instances.Cache.Invalidate,
// loadbalancer.Cache.Invalidate). A provider without CloudChanged has its
// longest cache TTL declared in Config.MaxStaleness, or reports it with a
// method MaxStaleness() time.Duration on Target.Cloud or a capability
// (ccmkit's caches, adapters and provider.Cloud report theirs), and every wait for
// such a change (INST-TERMINATED, INST-STOPPED, INST-NEW-INSTANCE,
// CTRL-NODE-TERMINATED, CTRL-NODE-SHUTDOWN, LB-PARTIAL-REPAIR) lasts
// Config.Timeout plus the longer of the two. So a provider built from
// ccmkit's caches at their defaults (instances.Cache: one minute) passes
// with no configuration, and a faster test drops the caches in
// CloudChanged. A cache that neither drops nor tells, with a TTL longer
// than Config.Timeout (30s), fails those rules.
//
// Busy clouds. A cloud that stays busy with a load balancer for a while
// after each write, refusing the next one meanwhile (OpenStack Octavia's
// PENDING_UPDATE), is declared by Config.BusyAfterWrite. A change of
// several writes then takes several calls: LB-MULTI-STEP drives one as
// the service controller does, calling again after exactly each
// api.RetryError's delay, and expects it to converge within a busy period
// and a second per write, with delays that do not double (a busy cloud is
// not a throttled one) and calls that do not wait the cloud out; the rules
// that count the writes of a change (LB-MULTI-STEP, LB-PER-PORT,
// LB-PARTIAL-REPAIR) wait BusyAfterWrite before they make it. The rule
// assumes the cloud does not throttle the few calls of one change: a
// throttled call's back-off doubles, as it should.
//
// Two clusters. A provider that owns load balancers and routes by a cluster
// ID of its own (loadbalancer.Options.ClusterID, routes.Options.ClusterID)
// ignores the clusterName argument, which is "kubernetes" in almost every
// cluster; give it Target.OtherCluster, the same provider over the same
// cloud configured as another cluster, and LB-CLUSTER-ISOLATION and
// ROUTE-CLUSTER-SCOPE run both clusters with one cluster name and one
// Service namespace, name and UID (two clusters restored from one etcd
// backup). Without it they tell the clusters apart by clusterName alone.
//
// # One cause, one failure
//
// Each provider method has a rule that owns it (EnsureLoadBalancer:
// LB-ENSURE-STATUS, InstanceShutdown: INST-SHUTDOWN, …). A method that
// answers cloudprovider.NotImplemented, to the rule or to a controller the
// rule runs, fails its owner; any other rule that then fails is reported
// skipped, "precondition failed: … see OWNER", with what it observed in its
// logs, and a rule that passes despite the answer (the node lifecycle
// controller logs InstanceShutdown's error and still deletes the Node of a
// terminated instance) passes. Upstream takes NotImplemented from these
// methods for an error like any other.
//
// The controller scenarios follow a cluster's order: the Nodes a Service
// needs are initialized before it is created, as in a cluster whose
// kubelets came first, so a provider that refuses EnsureLoadBalancer with
// no nodes (upstream retries it) fails only LB-NO-NODES, a recommendation;
// a Service created before any Node is CTRL-SERVICE-BEFORE-NODES' scenario.
//
// # Concurrency and output
//
// Run and Check run the rules one after the other; rules start goroutines of
// their own (the concurrency rules and the controllers), so run the suite
// with -race. A provider that panics fails the rule it panicked in; a
// provider call that blocks fails its rule after
// 4×(Config.Timeout+Config.MaxStaleness)+5s and is abandoned. The upstream
// controllers log through klog; silence it in your test with klog.SetOutput
// and klog.LogToStderr(false) if the output is noisy.
//
// Reading the verdict under -race. The race detector fails whichever
// subtest is running when it sees a race, wherever the racing code is, so
// a provider or vendor library with goroutines of its own (a watcher, a
// metrics loop) can fail subtests whose rules passed. The rules' verdicts
// are the suite's: Run ends with a Summary (counts, then each failed rule),
// names the subtests only the race detector failed, and returns each
// Outcome; Evaluate and Check report the rules alone. Read the race
// reports for the racing code, and the Summary for the verdict.
//
// The rules, with the upstream source each comes from, follow.
package conformance
