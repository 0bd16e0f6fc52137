// Package stack puts the e2e pieces together: the example
// cloud-controller-manager with its fake cloud (StartCCM), and the whole
// stack — control plane, CCM, fake cloud — in one call (Start), for the demo
// and the benchmark. The scenario tests share one control plane and use
// StartCCM directly.
package stack
