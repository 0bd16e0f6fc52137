package chart

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// Release is a release of the chart installed on an API server.
type Release struct {
	cfg  *action.Configuration
	name string
}

// Install installs the chart (Load) as release name into namespace of the
// API server of kubeconfig, as `helm install` does (server-side apply,
// release record in a Secret of namespace), with values over the chart's
// defaults. It does not wait for the pods: on the e2e control plane
// nothing runs them.
func Install(ctx context.Context, kubeconfig, namespace, name string, values map[string]any, timeout time.Duration) (*Release, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &namespace
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		return nil, fmt.Errorf("chart: helm configuration for %s: %w", kubeconfig, err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = name, namespace
	in.WaitStrategy, in.Timeout = kube.HookOnlyStrategy, timeout
	in.ServerSideApply = true
	if _, err := in.RunWithContext(ctx, c, values); err != nil {
		return nil, fmt.Errorf("chart: installing release %s into %s: %w", name, namespace, err)
	}
	return &Release{cfg: cfg, name: name}, nil
}

// Uninstall deletes every object of the release and its record.
func (r *Release) Uninstall(timeout time.Duration) error {
	u := action.NewUninstall(r.cfg)
	u.WaitStrategy, u.Timeout = kube.HookOnlyStrategy, timeout
	if _, err := u.Run(r.name); err != nil {
		return fmt.Errorf("chart: uninstalling release %s: %w", r.name, err)
	}
	return nil
}
