package main

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/cloud-provider/names"

	"github.com/ccmkit/ccmkit/housekeeping"
	"github.com/ccmkit/ccmkit/provider"
)

// TestHelpListsFlags checks what `go run ./example --help` prints: the flags
// a team needs to run the CCM, and the logging flags.
func TestHelpListsFlags(t *testing.T) {
	cmd, err := newCommand()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("--help: %v", err)
	}
	for _, flag := range []string{"--cloud-provider ", "--cloud-config ", "--kubeconfig ", "--leader-elect ", "--v ", "--logging-format ", "--cluster-name ", "--controllers "} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("--help does not list %s", strings.TrimSpace(flag))
		}
	}
}

// TestControllersAreACopy checks that the controller set is a clone of the
// upstream defaults with all four controllers and ccmkit's two
// housekeeping ones, so changing it cannot change
// app.DefaultInitFuncConstructors.
func TestControllersAreACopy(t *testing.T) {
	var h housekeepingOptions
	c := controllers(&h)
	for _, name := range []string{names.CloudNodeController, names.CloudNodeLifecycleController, names.ServiceLBController, names.NodeRouteController,
		housekeeping.DriftRepairName, housekeeping.OrphanCollectionName} {
		if _, ok := c[name]; !ok {
			t.Errorf("controller %q missing", name)
		}
	}
	delete(c, names.ServiceLBController)
	if _, ok := controllers(&h)[names.ServiceLBController]; !ok {
		t.Error("deleting from controllers() changed the upstream defaults")
	}
}

// TestFakeRegistered checks that the binary registers the fake cloud.
func TestFakeRegistered(t *testing.T) {
	if got := provider.Registered(); len(got) != 1 || got[0] != "fake" {
		t.Errorf("provider.Registered() = %q, want [fake]: the fake import registers it", got)
	}
}
