package conformance

// rules is the suite: every rule, in the order Run and Check run them.
// Sources are files of k8s.io/cloud-provider@v0.37.2 unless a module is
// named. rules_doc.go renders this table (go test -run TestRulesDoc -update).
//
// Every direct provider call of a rule (lb, inst, routes, zones, caps) is
// made again after its delay while it fails with an api.RetryError, as the
// controllers requeue it (see retrying, which cites where); only the
// outage rules and CTX-CANCELLED take a single answer. Every change the
// suite makes behind the provider's back goes through changeCloud
// (Hooks.CloudChanged) and is awaited with eventuallyChanged
// (Config.MaxStaleness).
var rules = []rule{
	// Provider and registration.
	{upstream, "PROVIDER-ACCESSORS", "No accessor returns true without a usable value: never (nil, true) nor a typed nil with true, and every claimed capability is offered.",
		"cloud.go Interface; controllers/nodelifecycle/node_lifecycle_controller.go ensureNodeExistsByProviderID", ruleProviderAccessors},
	{upstream, "PROVIDER-NAME", "ProviderName is a constant bare name, equal to Config.ProviderName when that is set.",
		"cloud.go GetInstanceProviderID", ruleProviderName},
	{upstream, "PROVIDER-CLUSTER-ID", "HasClusterID reports true, unless the CCM runs with --allow-untagged-cloud.",
		"sample/basic_main.go cloudInitializer", ruleProviderClusterID},
	{upstream, "PROVIDER-REGISTRATION", "The provider is registered under Config.ProviderName, and its factory builds it from a nil reader (or Config.CloudConfig) without error, panic or re-registering.",
		"plugins.go GetCloudProvider, InitCloudProvider", ruleProviderRegistration},
	{recommendation, "PROVIDER-BAD-CONFIG", "The factory rejects Config.BadCloudConfig with an error, never a panic.",
		"plugins.go InitCloudProvider (upstream stops the CCM on a factory error, and needs no rejection: rejecting is how a typo does not run a default cloud)", ruleProviderBadConfig},

	// LoadBalancer.
	{upstream, "LB-ENSURE-STATUS", "EnsureLoadBalancer succeeds for a plain TCP Service, with and without nodes, with a non-nil status holding at least one ingress, once it stops returning api.RetryError (made again after each RetryAfter within Config.Timeout, as the service controller requeues it).",
		"controllers/service/controller.go processNextServiceItem, syncLoadBalancerIfNeeded, ensureLoadBalancer", ruleLBEnsureStatus},
	{upstream, "LB-INGRESS-VALID", "Every ingress has a valid IP or a DNS hostname that is not an IP (a hostname alone only with Claims.HostnameIngress), and ipMode only with an IP.",
		"controllers/service/controller.go patchStatus (k8s.io/kubernetes pkg/apis/core/validation ValidateLoadBalancerStatus)", ruleLBIngressValid},
	{upstream, "LB-GET-EXISTS", "GetLoadBalancer reports exists=false before the first Ensure and true after it, also with no backends.",
		"controllers/service/controller.go syncLoadBalancerIfNeeded, lockedUpdateLoadBalancerHosts", ruleLBGetExists},
	{upstream, "LB-IDEMPOTENT", "Repeating EnsureLoadBalancer with an equal Service and the same nodes in any order succeeds, returns the same ingress and creates nothing.",
		"controllers/service/controller.go New (AddFunc), processServiceCreateOrUpdate", ruleLBIdempotent},
	{recommendation, "LB-CONVERGED", "EnsureLoadBalancer and UpdateLoadBalancer on a converged load balancer make no write to the cloud.",
		"controllers/service/controller.go New (AddFunc), nodeSyncService (upstream calls Ensure on every Service add and Update on node changes, and needs only success: writing nothing spares the cloud's API quota)", ruleLBConverged},
	{upstream, "LB-DELETE", "After EnsureLoadBalancerDeleted, GetLoadBalancer reports exists=false and nothing the provider created remains.",
		"controllers/service/controller.go syncLoadBalancerIfNeeded, processLoadBalancerDelete", ruleLBDelete},
	{upstream, "LB-DELETE-UNKNOWN", "EnsureLoadBalancerDeleted of a load balancer that never existed or is already gone returns nil.",
		"cloud.go LoadBalancer.EnsureLoadBalancerDeleted; controllers/service/controller.go processServiceDeletion", ruleLBDeleteUnknown},
	{upstream, "LB-DELETE-STALE", "GetLoadBalancer reports the load balancer, and EnsureLoadBalancerDeleted deletes it, from a stale Service: type ClusterIP, node ports 0, no status.",
		"controllers/service/controller.go needsCleanup, syncLoadBalancerIfNeeded", ruleLBDeleteStale},
	{upstream, "LB-RECREATE", "EnsureLoadBalancer after EnsureLoadBalancerDeleted builds the load balancer again.",
		"controllers/service/controller.go processServiceCreateOrUpdate", ruleLBRecreate},
	{upstream, "LB-BACKENDS", "The backends are exactly the nodes given to the last Ensure or Update, NotReady nodes and nodes whose addresses are not set yet included.",
		"controllers/service/controller.go nodeSyncService, lockedUpdateLoadBalancerHosts, stableNodeSetPredicates, shouldSyncUpdatedNode", ruleLBBackends},
	{upstream, "LB-PORTS", "The listeners follow the Service ports: a changed port replaces the old one, an added port is added.",
		"controllers/service/controller.go needsUpdate, portEqualForLB", ruleLBPorts},
	{upstream, "LB-SOURCE-RANGES", "Allowed sources are spec.loadBalancerSourceRanges, else the valid annotation (with Claims.SourceRangesAnnotation; unclaimed, a restricting annotation is rejected, not opened to all), else all of each IP family of the Service.",
		"service/helpers/helper.go GetLoadBalancerSourceRanges; controllers/service/controller.go ensureLoadBalancer", ruleLBSourceRanges},
	{recommendation, "LB-SOURCE-RANGES-MALFORMED", "EnsureLoadBalancer rejects a malformed source-range annotation with an error instead of opening the load balancer to all.",
		"service/helpers/helper.go GetLoadBalancerSourceRanges (the kube-apiserver rejects a malformed annotation on create and on a change: k8s.io/kubernetes pkg/apis/core/validation validateService, so only a Service stored before that validation keeps one)", ruleLBSourceRangesMalformed},
	{upstream, "LB-HEALTH-CHECK", "With externalTrafficPolicy Local backends are checked on spec.healthCheckNodePort /healthz, and no longer on it once the Service is switched to Cluster.",
		"service/helpers/helper.go GetServiceHealthCheckPathPort, NeedsHealthCheck", ruleLBHealthCheck},
	{recommendation, "LB-HEALTH-CHECK-CLUSTER", "With externalTrafficPolicy Cluster backends are checked on kube-proxy's 10256 /healthz.",
		"service/helpers/helper.go GetServiceHealthCheckPathPort (upstream needs no check for Cluster, but kube-proxy serves its own health on k8s.io/kubernetes pkg/cluster/ports ProxyHealthzPort 10256, pkg/proxy/healthcheck proxy_health.go, so a node whose kube-proxy is down is taken out)", ruleLBHealthCheckCluster},
	{upstream, "LB-UNSUPPORTED-REJECTED", "EnsureLoadBalancer returns an error for an unclaimed feature (UDP, SCTP, mixed protocols, no node ports, spec source ranges) instead of building something else.",
		"controllers/service/controller.go ensureLoadBalancer (\"the next step is expected to return an error for unsupported protocols\")", ruleLBUnsupportedRejected},
	{recommendation, "LB-DUAL-STACK-REJECTED", "Without Claims.DualStackLoadBalancers, EnsureLoadBalancer returns an error for a RequireDualStack Service instead of serving it single-stack.",
		"controllers/service/controller.go ensureLoadBalancer (upstream passes the Service as is and needs no rejection, but an error, as a Service event, tells the user what a silent single-stack load balancer hides)", ruleLBDualStackRejected},
	{upstream, "LB-CLAIMED-FEATURES", "EnsureLoadBalancer builds each claimed feature as asked: protocols, ports, node-port-less listeners, an ingress per IP family for RequireDualStack.",
		"controllers/service/controller.go ensureLoadBalancer", ruleLBClaimedFeatures},
	{upstream, "LB-CLUSTER-ISOLATION", "Two clusters with a Service of the same namespace and name (with Target.OtherCluster: also the same UID and cluster name, through two providers) never see, update or delete each other's load balancer.",
		"cloud.go LoadBalancer (clusterName); controllers/service/controller.go syncLoadBalancerIfNeeded", ruleLBClusterIsolation},
	{upstream, "LB-CONCURRENT", "Concurrent Ensure and Update calls, on one Service and on several, all succeed and leave every load balancer converged.",
		"controllers/service/controller.go Run (service and node workers), lockedUpdateLoadBalancerHosts", ruleLBConcurrent},
	{upstream, "LB-NODE-SYNC", "After a node joins and after one leaves, delivered as the service controller delivers them (UpdateLoadBalancer of every Service, concurrently, with the same nodes), every Service's backends are exactly the nodes given, also where their load balancers share a backend pool.",
		"controllers/service/controller.go syncNodes, updateLoadBalancerHosts, nodeSyncService", ruleLBNodeSync},
	{upstream, "LB-DELETE-SHARED", "Deleting one of several Services leaves the other Services' backends as they were: a backend pool they share is never emptied, nor deleted while referenced; and deleting the last leaves nothing the provider created.",
		"controllers/service/controller.go processLoadBalancerDelete, nodeSyncService (a deletion syncs no other Service: their backends stay as it left them until a node changes)", ruleLBDeleteShared},
	{recommendation, "LB-SHARED-POOL-WRITES", "With Claims.SharedBackendPools, a node joining several Services costs one cloud write, however many Services there are.",
		"controllers/service/controller.go updateLoadBalancerHosts (upstream needs only success, but a write per Service makes every node sync cost nodes × Services writes, which clouds answer with throttling)", ruleLBSharedPoolWrites},
	{upstream, "LB-OUTAGE", "When the cloud API fails, GetLoadBalancer returns an error, never exists=false.",
		"controllers/service/controller.go syncLoadBalancerIfNeeded (exists=false drops the finalizer)", ruleLBOutage},

	// InstancesV2 and Zones.
	{upstream, "INST-EXISTS", "InstanceExists is (true, nil) for running instances, by provider ID and by name, and (false, nil) for one that never existed.",
		"controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes, ensureNodeExistsByProviderID", ruleInstExists},
	{upstream, "INST-TERMINATED", "InstanceExists of a terminated instance becomes (false, nil) within Config.Timeout+MaxStaleness after Hooks.CloudChanged; other instances still exist.",
		"controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes", ruleInstTerminated},
	{upstream, "INST-SHUTDOWN", "InstanceShutdown of a running instance is (false, nil).",
		"controllers/nodelifecycle/node_lifecycle_controller.go shutdownInCloudProvider", ruleInstShutdown},
	{upstream, "INST-STOPPED", "A stopped instance still exists and is shut down; started again, it is not shut down; each change shows within Config.Timeout+MaxStaleness after Hooks.CloudChanged.",
		"controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes, shutdownInCloudProvider", ruleInstStopped},
	{upstream, "INST-METADATA", "InstanceMetadata, by provider ID and by name, is non-nil with one ProviderID \"<ProviderName()>://…\" (or empty) equal to spec.providerID when set, the same label-valid type, zone and region both ways; a missing instance gets an error or nil metadata.",
		"controllers/node/node_controller.go getInstanceMetadata, getNodeModifiersFromCloudProvider", ruleInstMetadata},
	{upstream, "INST-ADDRESSES", "Node addresses are valid and unique, of both IP families with Claims.DualStackNodeAddresses.",
		"controllers/node/node_controller.go updateNodeAddress, getNodeAddressesByProviderIDOrName (the status patch is validated: k8s.io/kubernetes pkg/apis/core/validation ValidateNodeUpdate rejects duplicate addresses)", ruleInstAddresses},
	{recommendation, "INST-INTERNAL-IP", "Node addresses include an InternalIP.",
		"controllers/node/node_controller.go updateNodeAddress (upstream takes any valid addresses, but a Node's IPs are its InternalIPs, and only without one its ExternalIPs: k8s.io/kubernetes pkg/util/node GetNodeHostIPs, so a Node without an InternalIP is reached on a public address)", ruleInstInternalIP},
	{recommendation, "INST-ADDRESSES-STABLE", "InstanceMetadata returns the same node addresses in the same order on every call, by provider ID and by name.",
		"controllers/node/node_controller.go nodeAddressesChangeDetected (it compares per address type, so an order change alone rewrites only a Node with two addresses of one type, but then the Node's primary IP, the first InternalIP of its family in k8s.io/kubernetes pkg/util/node GetNodeHostIPs, changes with it)", ruleInstAddressesStable},
	{upstream, "INST-PROVIDED-NODE-IP", "Every IP of a node's alpha.kubernetes.io/provided-node-ip annotation is among its addresses.",
		"controllers/node/node_controller.go updateNodeAddressesFromNodeIP; node/helpers/address.go GetNodeAddressesFromNodeIP", ruleInstProvidedNodeIP},
	{recommendation, "INST-LABELS", "AdditionalLabels have valid keys and values, none under kubernetes.io or k8s.io.",
		"controllers/node/node_controller.go getNodeModifiersFromCloudProvider (upstream discards such labels with a warning, so they never reach the Node)", ruleInstLabels},
	{upstream, "INST-NEW-INSTANCE", "An instance created after the provider started is never reported (false, nil), neither before nor after Hooks.CloudChanged, and has metadata within Config.Timeout+MaxStaleness after it.",
		"controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes; controllers/node/node_controller.go syncNode", ruleInstNewInstance},
	{upstream, "INST-OUTAGE", "When the cloud API fails, InstanceExists of an existing instance is an error (or true), never (false, nil).",
		"controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes (false without an error deletes the Node)", ruleInstOutage},
	{upstream, "INST-CONCURRENT", "Concurrent instance calls all succeed with the answers of sequential calls.",
		"controllers/node/node_controller.go UpdateNodeStatus; controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes", ruleInstConcurrent},
	{upstream, "ZONES-LOOKUP", "GetZoneByProviderID and GetZoneByNodeName agree with each other, with label-valid zone and region.",
		"controllers/node/node_controller.go getZoneByProviderIDOrName; cloud.go Interface (Zones is not called when InstancesV2 is offered)", ruleZonesLookup},

	// Routes.
	{upstream, "ROUTE-ROUNDTRIP", "ListRoutes returns each created route, DestinationCIDR byte-identical, with its TargetNode and Blackhole false.",
		"controllers/route/route_controller.go reconcile, getRouteAction", ruleRouteRoundtrip},
	{upstream, "ROUTE-CIDR-VERBATIM", "A valid IPv6 pod CIDR that is not in canonical form is listed exactly as given.",
		"controllers/route/route_controller.go getRouteAction (string comparison)", ruleRouteCIDRVerbatim},
	{upstream, "ROUTE-NAMES", "A node's IPv4 and IPv6 routes, created with one nameHint and any Route.Name, are both kept.",
		"controllers/route/route_controller.go reconcile (nameHint is the node UID); cloud.go Routes.CreateRoute", ruleRouteNames},
	{upstream, "ROUTE-DELETE", "DeleteRoute of a route as listed removes exactly that route; deleting every route leaves nothing behind.",
		"controllers/route/route_controller.go reconcile; cloud.go Routes.DeleteRoute", ruleRouteDelete},
	{upstream, "ROUTE-TARGET-ADDRESSES", "A route listed with EnableNodeAddresses carries the TargetNodeAddresses it was created with.",
		"controllers/route/route_controller.go getRouteAction, equalNodeAddrs", ruleRouteTargetAddresses},
	{upstream, "ROUTE-BLACKHOLE", "Routes to running instances are not Blackhole, also for Nodes named unlike their instances, and a route to a terminated instance can be deleted as listed.",
		"controllers/route/route_controller.go reconcile", ruleRouteBlackhole},
	{upstream, "ROUTE-CLUSTER-SCOPE", "ListRoutes for one cluster never returns another cluster's routes, nor (with Target.OtherCluster) those of another cluster of the same name on the same network.",
		"cloud.go Routes.ListRoutes", ruleRouteClusterScope},
	{upstream, "ROUTE-CONCURRENT", "Concurrent CreateRoute and DeleteRoute calls all succeed and leave exactly the expected routes.",
		"controllers/route/route_controller.go reconcile (maxConcurrentRouteOperations)", ruleRouteConcurrent},
	{upstream, "ROUTE-OUTAGE", "When the cloud API fails, ListRoutes returns an error, never a partial list.",
		"controllers/route/route_controller.go reconcileNodeRoutes", ruleRouteOutage},

	// Every capability.
	{upstream, "SENTINELS-UNWRAPPED", "Where upstream compares a sentinel with == and acts on it, it is returned unwrapped: ImplementedElsewhere from EnsureLoadBalancer, and from UpdateLoadBalancer and EnsureLoadBalancerDeleted of a load balancer GetLoadBalancer reports (elsewhere, legacy Instances.InstanceID included, which GetInstanceProviderID wraps with %w for callers using errors.Is, wrapping is fine).",
		"cloud.go GetInstanceProviderID; controllers/service/controller.go syncLoadBalancerIfNeeded, lockedUpdateLoadBalancerHosts", ruleSentinelsUnwrapped},
	{upstream, "ARGS-NOT-MUTATED", "No call modifies its Service, Node or Route arguments where upstream reads them afterwards: every field of a LoadBalancer call's Service and Nodes; the name, UID, annotations, provider ID, taints and addresses of an InstancesV2 call's Node; CreateRoute's DestinationCIDR and the Node addresses its TargetNodeAddresses shares.",
		"cloud.go LoadBalancer; controllers/service/controller.go ensureLoadBalancer (nodes from the informer cache)", ruleArgsNotMutated},
	{upstream, "CTX-CANCELLED", "With a cancelled context no call returns a wrong answer: an error, or the truth.",
		"controllers/service/controller.go Run, syncLoadBalancerIfNeeded; controllers/nodelifecycle/node_lifecycle_controller.go Run, MonitorNodes (calls get the controller's context, and a wrong answer is acted on: exists=false drops a finalizer, false without an error deletes a Node)", ruleCtxCancelled},
	{recommendation, "CTX-CANCELLED-PROMPT", "With a cancelled context every call returns within Config.Timeout.",
		"controllers/service/controller.go Run (upstream needs no prompt return, as nothing waits for a call once the controller's context ends with the CCM, but a call that ignores its context holds its worker, and the CCM's shutdown, until its cloud call ends)", ruleCtxCancelledPrompt},

	// Through the upstream controllers.
	{upstream, "CTRL-NODE-INIT", "Through the cloud node controller, a node registered with the uninitialized taint gets its provider ID, addresses and topology labels and loses the taint.",
		"controllers/node/node_controller.go syncNode", ruleCtrlNodeInit},
	{upstream, "CTRL-NODE-TERMINATED", "Through the node lifecycle controller, the Node of a terminated instance is deleted within Config.Timeout+MaxStaleness after Hooks.CloudChanged, and the Nodes of running instances are kept.",
		"controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes", ruleCtrlNodeTerminated},
	{upstream, "CTRL-NODE-SHUTDOWN", "Through the node lifecycle controller, the Node of a stopped instance gets the shutdown taint within Config.Timeout+MaxStaleness after Hooks.CloudChanged, and is kept.",
		"controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes", ruleCtrlNodeShutdown},
	{upstream, "CTRL-SERVICE-LB", "Through the service controller, a LoadBalancer Service gets the cleanup finalizer and an ingress.",
		"controllers/service/controller.go syncLoadBalancerIfNeeded, addFinalizer, patchStatus", ruleCtrlServiceLB},
	{upstream, "CTRL-SERVICE-PORT", "Through the service controller, a changed Service port reaches the cloud.",
		"controllers/service/controller.go needsUpdate", ruleCtrlServicePort},
	{upstream, "CTRL-SERVICE-DELETE", "Through the service controller, a deleted Service releases its load balancer, then its finalizer.",
		"controllers/service/controller.go syncLoadBalancerIfNeeded, removeFinalizer", ruleCtrlServiceDelete},
	{upstream, "CTRL-SERVICE-CLASS", "Through the service controller, a Service with spec.loadBalancerClass is left alone.",
		"controllers/service/controller.go wantsLoadBalancer", ruleCtrlServiceClass},
	{upstream, "CTRL-ROUTES", "Through the route controller, routes appear for the nodes' pod CIDRs, stay put while nothing changes, and go away with their nodes.",
		"controllers/route/route_controller.go reconcile", ruleCtrlRoutes},
}

// ruleCases names the cases of the table-driven rules, which Config.Skip
// accepts as "RULE/case"; a rule body runs a case only when r.skipCase of
// its name is false.
var ruleCases = map[string][]string{
	"LB-SOURCE-RANGES":        {"spec", "annotation", "spec-and-annotation", "none", "none-dual-stack", "annotation-unclaimed"},
	"LB-UNSUPPORTED-REJECTED": {"udp", "sctp", "mixed-protocols", "node-port-less", "source-ranges"},
	"LB-CLAIMED-FEATURES":     {"udp", "sctp", "mixed-protocols", "dual-stack", "node-port-less", "source-ranges"},
}
