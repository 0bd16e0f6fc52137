//go:build linux

package image

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestBuildOfflineAndRun builds the image from example/Dockerfile with no
// network and no Docker (the binary on LocalBase), writes it as an OCI
// layout, reads it back, checks the configuration the chart relies on,
// unpacks it and runs the binary from it as the image's user; then checks
// that a second build gives the same digest and that a push and a pull
// through a registry keep it.
func TestBuildOfflineAndRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example CCM (minutes cold)")
	}
	ctx := t.Context()
	p := Platform{}.withDefaults()
	img, r, err := Build(ctx, t.TempDir(), p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	if err := WriteLayout(dir, img, "v0.1.0"); err != nil {
		t.Fatal(err)
	}
	if err := WriteLayout(dir, img, ""); err == nil || !strings.Contains(err.Error(), "expected a new or empty directory") {
		t.Errorf("WriteLayout into a used directory: %v: want a refusal", err)
	}
	back, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	digest := mustDigest(t, img)
	if got := mustDigest(t, back); got != digest {
		t.Fatalf("layout image %s != built image %s", got, digest)
	}

	cfg, err := back.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if !slices.Equal(c.Entrypoint, []string{"/cloud-controller-manager"}) || c.Cmd != nil || c.User != "65532:65532" {
		t.Errorf("config Entrypoint %q Cmd %q User %q: want [/cloud-controller-manager], none, 65532:65532", c.Entrypoint, c.Cmd, c.User)
	}
	for k, v := range r.Labels {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q: want %q", k, c.Labels[k], v)
		}
	}
	if cfg.OS != p.OS || cfg.Architecture != p.Arch {
		t.Errorf("platform %s/%s: want %s/%s", cfg.OS, cfg.Architecture, p.OS, p.Arch)
	}
	if m, _ := back.MediaType(); m != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %s: want an OCI manifest", m)
	}

	root := unpack(t, back)
	bin := filepath.Join(root, "cloud-controller-manager")
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("binary mode %v: want 0755", fi.Mode().Perm())
	}
	checkStatic(t, bin)
	if out := run(t, bin, "--help"); !strings.Contains(out, "--cloud-provider") || !strings.Contains(out, "--drift-repair-period") {
		t.Errorf("--help does not list --cloud-provider and --drift-repair-period:\n%.2000s", out)
	}
	if out := run(t, bin, "--version"); strings.TrimSpace(out) != "Kubernetes v0.1.0" {
		t.Errorf("--version printed %q: want \"Kubernetes v0.1.0\" (the Dockerfile's VERSION)", out)
	}

	again, _, err := Build(ctx, t.TempDir(), p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustDigest(t, again); got != digest {
		t.Errorf("a second build gives %s, the first %s: want the same digest (a reproducible build)", got, digest)
	}

	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	ref := strings.TrimPrefix(reg.URL, "http://") + "/acme/cloud-controller-manager:v0.1.0"
	pushed, err := Push(ctx, ref, img, true)
	if err != nil {
		t.Fatal(err)
	}
	if pushed.DigestStr() != digest.String() {
		t.Errorf("pushed %s: want %s", pushed, digest)
	}
	pulled, err := Pull(ctx, ref, p, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustDigest(t, pulled); got != digest {
		t.Errorf("pulled %s: want %s", got, digest)
	}
	if _, err := Push(ctx, "UPPER/case:tag", img, true); err == nil || !strings.Contains(err.Error(), `reference "UPPER/case:tag"`) {
		t.Errorf("Push of a malformed reference: %v: want an error naming it", err)
	}
}

func mustDigest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// unpack extracts img's flattened filesystem into a new directory that
// any user may read, refusing entries that would land outside it.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	root, err := os.MkdirTemp("", "ccmkit-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean("/" + h.Name)
		if name != "/"+strings.TrimSuffix(h.Name, "/") {
			t.Fatalf("layer entry %q: want a clean relative path", h.Name)
		}
		dst := filepath.Join(root, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			err = writeFile(dst, tr, h.FileInfo().Mode().Perm())
		default:
			t.Fatalf("layer entry %q of type %c: want a directory or a regular file", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(path, mode) // not narrowed by the umask
}

// checkStatic fails unless bin is an ELF executable with no interpreter,
// no shared libraries and no symbol table (-s).
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter: want a static binary (CGO_ENABLED=0)")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %q: want none", libs)
	}
	if f.Section(".symtab") != nil {
		t.Error("the binary has a symbol table: want it stripped (-ldflags=-s)")
	}
}

// run runs bin with args in its unpacked root, as the image's user
// (65532:65532) when the test runs as root, and returns its output.
func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/home/nonroot"}
	cmd.WaitDelay = 10 * time.Second
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: NonRootUID, Gid: NonRootGID}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}
