//go:build race

package scale_test

import "github.com/ccmkit/ccmkit/testing/scale"

// raceSkips are the scenarios a -race build skips: the restart runs the
// upstream service controller's node and service workers at once, and
// k8s.io/cloud-provider@v0.37.2 controllers/service/controller.go races
// there (see scale.Config.NodesFirst).
var raceSkips = []string{scale.Restart}

// raceBuild is true in a -race build, which must create the Services
// after the Nodes (scale.Config.NodesFirst).
const raceBuild = true
