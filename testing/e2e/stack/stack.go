package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/controlplane"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
)

// CCM is an example CCM process with its fake cloud. Its methods are safe
// for concurrent use.
type CCM struct {
	*ccm.Process
	// CloudConfig is the path of the fake's cloud-config.
	CloudConfig string
	// AddressFile is where the fake writes its admin address once the CCM
	// initialized the cloud.
	AddressFile string
}

// StartCCM writes cloud as the fake's cloud-config in dir (with the admin
// endpoint on a free loopback port, its address written to
// <dir>/<name>.admin-address) and starts the CCM described by cfg with it.
// cfg.Binary and cfg.Kubeconfig are required; cfg.Name, CloudConfig and
// LogPath are set here (log: <dir>/<name>.log). The caller must Stop or Kill
// the returned process.
func StartCCM(dir, name string, cloud fake.Config, cfg ccm.Config) (*CCM, error) {
	c := &CCM{
		CloudConfig: filepath.Join(dir, name+".cloud-config.yaml"),
		AddressFile: filepath.Join(dir, name+".admin-address"),
	}
	cloud.Admin = fake.AdminSection{Address: "127.0.0.1:0", AddressFile: c.AddressFile}
	if err := fakecloud.WriteConfig(c.CloudConfig, cloud); err != nil {
		return nil, err
	}
	cfg.Name = name
	cfg.CloudConfig = c.CloudConfig
	cfg.LogPath = filepath.Join(dir, name+".log")
	p, err := ccm.Start(cfg)
	if err != nil {
		return nil, err
	}
	c.Process = p
	return c, nil
}

// Admin waits until the CCM has initialized its fake cloud — at start-up,
// or once it leads with leader election on — and returns a client for the
// fake's admin endpoint. It fails at once, with the log tail, if the CCM
// exits, and when ctx ends.
func (c *CCM) Admin(ctx context.Context) (*fakecloud.Admin, error) {
	return fakecloud.WaitAdmin(ctx, c.AddressFile, func() error {
		if exited, err := c.Exited(); exited {
			return fmt.Errorf("CCM %s exited (%v); last log lines:\n%s", c.Name(), err, c.LogTail(40)) //nolint:errorlint // err is nil for a zero exit status: %v prints <nil> where %w would print %!w(<nil>)
		}
		return nil
	})
}

// Config configures Start. Cloud and CCM are templates; the zero value runs
// a fake cloud without instances and the CCM with ccm.Config's defaults.
type Config struct {
	// Dir holds everything (control plane, logs, kubeconfig). Empty means
	// a temporary directory that Stop removes.
	Dir string
	// Cloud is the fake's cloud-config (its admin settings are overwritten).
	Cloud fake.Config
	// CCM configures the CCM; Binary, Kubeconfig, CloudConfig, LogPath and
	// Name are filled in.
	CCM ccm.Config
	// Progress receives a line per step; nil is silent.
	Progress io.Writer
}

// Stack is a running control plane with the example CCM and its fake cloud.
// Its fields are set by Start and must not be changed; its methods are safe
// for concurrent use.
type Stack struct {
	Dir          string
	ControlPlane *controlplane.ControlPlane
	// Client is an admin client of the API server.
	Client kubernetes.Interface
	CCM    *CCM
	// Admin is the fake cloud's admin endpoint.
	Admin *fakecloud.Admin

	removeDir string
}

// Start builds what is missing (etcd and kube-apiserver into the cache, the
// CCM from the checked-out source), starts the control plane, starts the
// CCM and waits until it has initialized its cloud. ctx bounds all of that.
// On error everything started is stopped. The caller must call Stop.
func Start(ctx context.Context, cfg Config) (_ *Stack, err error) {
	s := &Stack{Dir: cfg.Dir}
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "ccmkit-stack-"); err != nil {
			return nil, fmt.Errorf("stack: %w", err)
		}
		s.removeDir = s.Dir
	} else if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	start := time.Now()
	s.ControlPlane, err = controlplane.Start(ctx, controlplane.Config{Dir: filepath.Join(s.Dir, "controlplane"), Progress: cfg.Progress})
	if err != nil {
		return nil, err
	}
	if s.Client, err = kubernetes.NewForConfig(s.ControlPlane.RESTConfig()); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	progressf(cfg.Progress, "building the example CCM (go build github.com/ccmkit/ccmkit/example in testing/e2e)")
	ccmCfg := cfg.CCM
	if ccmCfg.Binary, err = ccm.Build(ctx, s.Dir, ccm.BuildOptions{}); err != nil {
		return nil, err
	}
	if ccmCfg.Kubeconfig == "" {
		ccmCfg.Kubeconfig = s.ControlPlane.KubeconfigPath()
	}
	if s.CCM, err = StartCCM(s.Dir, "ccm", cfg.Cloud, ccmCfg); err != nil {
		return nil, err
	}
	progressf(cfg.Progress, "example CCM started (pid %d, log %s)", s.CCM.PID(), s.CCM.LogPath())
	if s.Admin, err = s.CCM.Admin(ctx); err != nil {
		return nil, err
	}
	progressf(cfg.Progress, "CCM running its controllers; fake cloud admin endpoint http://%s (stack up in %s)", s.Admin.Address(), time.Since(start).Round(100*time.Millisecond))
	return s, nil
}

// PIDs returns the process IDs of everything the stack started.
func (s *Stack) PIDs() []int {
	var pids []int
	if s.CCM != nil {
		pids = append(pids, s.CCM.PID())
	}
	if s.ControlPlane != nil {
		pids = append(pids, s.ControlPlane.PIDs()...)
	}
	return pids
}

// Stop stops the CCM and the control plane and removes the temporary
// directory if Start created it. It is safe to call more than once.
func (s *Stack) Stop() error {
	var errs []error
	if s.CCM != nil {
		errs = append(errs, s.CCM.Stop())
	}
	if s.ControlPlane != nil {
		errs = append(errs, s.ControlPlane.Stop())
	}
	if s.removeDir != "" {
		errs = append(errs, os.RemoveAll(s.removeDir))
	}
	return errors.Join(errs...)
}

func progressf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
