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

// ToolKey returns the cache key of the tool module in dir: a hash of its
// go.mod, go.sum and main.go and of the Go version.
func ToolKey(dir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("buildcache: hashing tool %s: %w", dir, err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Tool returns the path of the cached binary of testing/e2e/tools/<name>
// ("etcd" or "kube-apiserver"), building it first if it is missing. Build
// output goes to progress (which may be nil). Building kube-apiserver from a
// cold module cache takes minutes; ctx bounds it.
//
// Safe for concurrent use, also across processes. Errors name the tool and
// include the go command's output.
func Tool(ctx context.Context, name string, progress io.Writer) (string, error) {
	mod, err := ModuleDir()
	if err != nil {
		return "", err
	}
	src := filepath.Join(mod, "tools", name)
	key, err := ToolKey(src)
	if err != nil {
		return "", err
	}
	cache, err := Dir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cache, "bin", name+"-"+key)
	if isExecutable(bin) {
		return bin, nil
	}
	unlock, err := lock(ctx, filepath.Join(cache, "bin", "."+name+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if isExecutable(bin) { // built by another process while we waited
		return bin, nil
	}
	if progress != nil {
		fmt.Fprintf(progress, "building %s into %s (first run only; minutes on a cold cache)\n", name, bin)
	}
	start := time.Now()
	if err := GoBuild(ctx, src, ".", bin); err != nil {
		return "", err
	}
	if progress != nil {
		fmt.Fprintf(progress, "built %s in %s\n", name, time.Since(start).Round(time.Second))
	}
	return bin, nil
}

// GoBuild runs `go -C dir build [flags] -o out pkg` with GOWORK=off,
// writing to a temporary file next to out and renaming it into place, so
// that a reader never sees a half-written binary. The error includes the go
// command's combined output.
func GoBuild(ctx context.Context, dir, pkg, out string, flags ...string) error {
	tmp := fmt.Sprintf("%s.tmp-%d", out, os.Getpid())
	args := append([]string{"-C", dir, "build"}, flags...)
	cmd := exec.CommandContext(ctx, "go", append(args, "-o", tmp, pkg)...)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.WaitDelay = 10 * time.Second
	output, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("buildcache: go build %s in %s: %w\n%s", pkg, dir, err, output)
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("buildcache: %w", err)
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
