// Package scale is a scale simulator for any cloud provider: it runs the
// four upstream controllers of a cloud-controller-manager (service, cloud
// node, cloud node lifecycle and route, from
// k8s.io/cloud-provider/controllers) in-process against a client-go fake
// clientset and the provider, through scenarios of a cluster's life, and
// counts the cloud calls each scenario costs.
//
// The calls are counted at the cloudprovider.Interface boundary by a
// metering wrapper the simulator puts around the provider, so the
// provider need not cooperate; a provider that can count its own cloud
// API calls reports them through Target.DriverCalls (FakeTarget does, for
// ccmkit's fake), and the report shows both. Each scenario states the
// fewest calls any provider needs for it (Minimum), with how that figure
// is derived, so that a report reads as "what the upstream controllers
// and this provider cost" against "what the work needs"; and the fewest
// cloud API calls (CloudMinimum), to compare with the Driver-boundary
// counts (Sum, ByCapability).
//
// What the work needs in cloud calls depends on the cloud, which the
// provider describes in Target.CloudCosts: the writes that create one
// load balancer for a Service with P ports (a base and a cost per port),
// the writes that delete one, and what one Node joining or leaving
// writes, to one backend pool shared by every load balancer, to each
// load balancer's own, or to each port's. The zero value is a flat cloud
// with shared pools: one write creates a load balancer, and a Node
// change is one write however many Services there are. A cloud without
// shared pools (DigitalOcean, Linode, OCI: a write per load balancer per
// Node change) or a hierarchical one (OpenStack Octavia: 1 + 4×P writes
// to create, a write per pool per Node change) states its costs, or its
// minimum is one it cannot reach. Each CloudMinimum's Why says which
// costs it used ("a confirming read and 1 + 4×1 writes per Service
// (Target.CloudCosts)"), and Report.CloudCosts holds them. FakeTarget
// states the fake's, from its cloud-config.
//
// Beside it each scenario states a CoalescedMinimum: the floor of a
// provider that holds changes back and writes them together
// (loadbalancer.Options.CoalesceWindow; routes.Table, with
// CloudCosts.RouteTable). CloudMinimum charges each Node change as it
// comes; the upstream service controller's node syncs already batch
// Node changes, so a provider lands between the two, and below the
// coalesced one only when its load balancers are created after the Nodes
// they would otherwise be written for.
//
// A Target that can count the load balancers
// its cloud holds (Target.LoadBalancers) has that count checked after
// each scenario: one per Service, none after the deletion. One that can
// list their backends (Target.Backends) has them checked too: bring-up
// and churn converge only when every load balancer holds exactly the
// live Nodes.
//
// A provider's caches run on real time while the controllers' periods
// are compressed: give the Target TTLs divided by Config.Compression too
// (cmd/scalebench does), or its reads are under-counted.
//
// The scenarios run in order over one cluster (see Run): bring-up,
// steady state, node churn, restart of the cloud-controller-manager, and
// mass Service deletion. The controllers' periods are the upstream
// defaults divided by Config.Compression; the simulation runs in wall
// time, so its convergence times are measurements, never assertions.
//
// It is not a load test of the Kubernetes API (the clientset is a fake),
// and not a conformance check: testing/conformance is. The bench command
// in cmd/scalebench writes the figures of BENCHMARKS.md.
package scale
