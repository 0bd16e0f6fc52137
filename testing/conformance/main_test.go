package conformance_test

import (
	"flag"
	"io"
	"os"
	"testing"

	"k8s.io/klog/v2"
)

// TestMain silences klog, which the upstream controllers log through at a
// rate of several lines per reconciliation; -klog.v=2 turns it back on.
func TestMain(m *testing.M) {
	fs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(fs)
	verbose := flag.Int("klog.v", -1, "klog verbosity; -1 silences klog")
	flag.Parse()
	if *verbose < 0 {
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("alsologtostderr", "false")
		_ = fs.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	} else {
		_ = fs.Set("v", flag.Lookup("klog.v").Value.String())
	}
	os.Exit(m.Run())
}
