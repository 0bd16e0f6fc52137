package buildcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// EnvCacheDir names the environment variable that overrides the cache
// directory.
const EnvCacheDir = "CCMKIT_E2E_CACHE"

// ModuleDir returns the directory of the testing/e2e module in the source
// tree, found from this file's compile-time path. It fails when the binary
// was built with -trimpath (the path is then not absolute).
func ModuleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", fmt.Errorf("buildcache: cannot locate the testing/e2e source tree from compile-time path %q (built with -trimpath?)", file)
	}
	// file is <module>/internal/buildcache/buildcache.go
	dir := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("buildcache: testing/e2e module not found at %s: %w", dir, err)
	}
	return dir, nil
}

// RootDir returns the directory of the ccmkit root module (two levels above
// the e2e module).
func RootDir() (string, error) {
	dir, err := ModuleDir()
	if err != nil {
		return "", err
	}
	return filepath.Dir(filepath.Dir(dir)), nil
}

// Dir returns the cache directory, creating it (and its bin subdirectory) if
// needed.
func Dir() (string, error) {
	dir := os.Getenv(EnvCacheDir)
	if dir == "" {
		mod, err := ModuleDir()
		if err != nil {
			return "", fmt.Errorf("%w; set %s to choose a cache directory", err, EnvCacheDir)
		}
		dir = filepath.Join(mod, ".cache")
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return "", fmt.Errorf("buildcache: creating cache directory: %w", err)
	}
	return dir, nil
}

// Tools lists the commands of the tool module (testing/e2e/tools), one
// directory each. They share one go.mod, so the packages etcd and
// kube-apiserver have in common (etcd's client and API, gRPC, protobuf,
// Prometheus, zap, OpenTelemetry) are resolved to one version and compiled
// once.
var Tools = []string{"etcd", "kube-apiserver"}

// ToolKey returns the cache key of the tool module in dir: a hash of its
// go.mod and go.sum, of the main.go of each of Tools and of the Go version.
// Every tool of the module has the same key, since one changed dependency
// may change them all.
func ToolKey(dir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	flags, err := ToolFlags(dir)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "flags %q\n", flags)
	names := []string{"go.mod", "go.sum"}
	for _, tool := range Tools {
		names = append(names, filepath.Join(tool, "main.go"))
	}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("buildcache: hashing tool module %s: %w", dir, err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Tool returns the path of the cached binary of testing/e2e/tools/<name>
// (one of Tools), building every tool first if one is missing: one `go
// build` of all the module's commands, so that a cold cache compiles the
// packages they share once. Build output goes to progress (which may be
// nil). Building from a cold Go cache takes minutes; ctx bounds it.
//
// Safe for concurrent use, also across processes. Errors name the tool and
// include the go command's output.
func Tool(ctx context.Context, name string, progress io.Writer) (string, error) {
	if !slices.Contains(Tools, name) {
		return "", fmt.Errorf("buildcache: tool %q: expected one of %v", name, Tools)
	}
	mod, err := ModuleDir()
	if err != nil {
		return "", err
	}
	src := filepath.Join(mod, "tools")
	key, err := ToolKey(src)
	if err != nil {
		return "", err
	}
	cache, err := Dir()
	if err != nil {
		return "", err
	}
	binDir := filepath.Join(cache, "bin")
	binOf := func(tool string) string { return filepath.Join(binDir, tool+"-"+key) }
	if isExecutable(binOf(name)) {
		return binOf(name), nil
	}
	unlock, err := lock(ctx, filepath.Join(binDir, ".tools.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if isExecutable(binOf(name)) { // built by another process while we waited
		return binOf(name), nil
	}
	if progress != nil {
		fmt.Fprintf(progress, "building %s into %s (first run only; minutes on a cold cache)\n",
			strings.Join(Tools, " and "), binDir)
	}
	start := time.Now()
	pkgs := toolPackages()
	outs := make([]string, len(Tools))
	for i, tool := range Tools {
		outs[i] = binOf(tool)
	}
	flags, err := ToolFlags(src)
	if err != nil {
		return "", err
	}
	if err := goBuildAll(ctx, src, nil, pkgs, outs, flags...); err != nil {
		return "", err
	}
	if progress != nil {
		fmt.Fprintf(progress, "built %s in %s\n", strings.Join(Tools, " and "), time.Since(start).Round(time.Second))
	}
	return binOf(name), nil
}

// toolPackages returns the main packages of Tools, relative to the tool
// module's directory.
func toolPackages() []string {
	pkgs := make([]string, len(Tools))
	for i, tool := range Tools {
		pkgs[i] = "./" + tool
	}
	return pkgs
}

// GoBuild runs `go -C dir build [flags] -o out pkg` with GOWORK=off,
// writing to a temporary file next to out and renaming it into place, so
// that a reader never sees a half-written binary. The error includes the go
// command's combined output.
func GoBuild(ctx context.Context, dir, pkg, out string, flags ...string) error {
	return goBuildAll(ctx, dir, nil, []string{pkg}, []string{out}, flags...)
}

// GoBuildEnv is GoBuild with env (NAME=value, such as CGO_ENABLED=0) added
// to the go command's environment.
func GoBuildEnv(ctx context.Context, dir string, env []string, pkg, out string, flags ...string) error {
	return goBuildAll(ctx, dir, env, []string{pkg}, []string{out}, flags...)
}

// goBuildAll builds the main packages pkgs in one go command (so that what
// they share compiles once) into a temporary directory next to the first
// out, then renames each binary to its out, in order.
func goBuildAll(ctx context.Context, dir string, env, pkgs, outs []string, flags ...string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(outs[0]), ".build-")
	if err != nil {
		return fmt.Errorf("buildcache: %w", err)
	}
	defer os.RemoveAll(tmp)
	args := append([]string{"-C", dir, "build"}, flags...)
	if len(pkgs) == 1 {
		args = append(args, "-o", filepath.Join(tmp, "0"))
	} else {
		args = append(args, "-o", tmp+string(filepath.Separator))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkgs...)...)
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	cmd.WaitDelay = 10 * time.Second
	output, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("buildcache: go build %s in %s: %w\n%s", strings.Join(pkgs, " "), dir, err, output)
	}
	for i, pkg := range pkgs {
		built := filepath.Join(tmp, filepath.Base(pkg))
		if len(pkgs) == 1 {
			built = filepath.Join(tmp, "0")
		}
		if err := os.Rename(built, outs[i]); err != nil {
			return fmt.Errorf("buildcache: %w", err)
		}
	}
	return nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// lock takes an exclusive flock on path, polling so that ctx can cancel the
// wait. The returned func releases it.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("buildcache: opening lock file: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("buildcache: locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("buildcache: waiting for %s: %w", path, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ToolFlags returns the go build flags of the tool module in dir: the
// version of k8s.io/kubernetes its go.mod requires, stamped into
// kube-apiserver the way Kubernetes' release build does
// (hack/lib/version.sh kube::version::ldflags sets these variables of
// k8s.io/component-base/version and k8s.io/client-go/pkg/version). Without
// it the server reports v0.0.0-master+$Format:%H$ at /version, which
// clients that check the server's version (Helm's kubeVersion, among
// others) refuse. A module that does not require k8s.io/kubernetes gets no
// flags.
func ToolFlags(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("buildcache: reading the tool module's go.mod: %w", err)
	}
	version := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
			version = f[1]
		} else if len(f) >= 3 && f[0] == "require" && f[1] == "k8s.io/kubernetes" {
			version = f[2]
		}
	}
	if version == "" {
		return nil, nil // no kube-apiserver to stamp
	}
	var major, minor string
	if v, ok := strings.CutPrefix(version, "v"); ok {
		parts := strings.SplitN(v, ".", 3)
		if len(parts) == 3 {
			major, minor = parts[0], parts[1]
		}
	}
	if major == "" {
		return nil, fmt.Errorf("buildcache: %s requires k8s.io/kubernetes at %q: expected a version vMAJOR.MINOR.PATCH", filepath.Join(dir, "go.mod"), version)
	}
	var ld []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		ld = append(ld,
			"-X", pkg+".gitVersion="+version,
			"-X", pkg+".gitMajor="+major,
			"-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitTreeState=clean",
		)
	}
	return []string{"-ldflags=" + strings.Join(ld, " ")}, nil
}
