// Package image builds the example cloud-controller-manager's image from
// example/Dockerfile without Docker: it reads the Dockerfile (Parse), runs
// the `go build` of its build stage on this machine (BuildBinary), puts the
// binary as one layer on a base (LocalBase, or one pulled with PullBase),
// sets the entrypoint, user, labels and environment the final stage
// declares (Assemble), and writes the result as an OCI image layout
// (WriteLayout) or pushes it to a registry (Push), with
// go-containerregistry. Command testing/e2e/cmd/image wraps it; its tests
// build the image offline, unpack it and run the binary from it.
//
// Reading the Dockerfile instead of repeating it keeps one recipe: the
// image `docker buildx build -f example/Dockerfile .` makes and the one
// this package makes run the same compiler command on the same sources,
// and differ only in the base (distroless/static, or LocalBase offline).
//
// It lives in the nested testing/e2e module so that library users never
// download go-containerregistry.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/ccmkit/ccmkit/testing/e2e/internal/buildcache"
)

// DockerfilePath is the image recipe, relative to the source tree's root
// (which is also its build context).
const DockerfilePath = "example/Dockerfile"

// epoch is every timestamp the builder writes (layer files, config,
// history), so that the same sources give the same digest.
var epoch = time.Unix(0, 0).UTC()

// Load reads and parses DockerfilePath of the source tree, returning it
// and the tree's root.
func Load() (d *Dockerfile, root string, err error) {
	if root, err = buildcache.RootDir(); err != nil {
		return nil, "", err
	}
	text, err := os.ReadFile(filepath.Join(root, DockerfilePath))
	if err != nil {
		return nil, "", fmt.Errorf("image: %w", err)
	}
	d, err = Parse(DockerfilePath, text)
	return d, root, err
}

// Platform is the OS and architecture to build for; the zero value is this
// machine's.
type Platform struct {
	OS, Arch string
}

func (p Platform) withDefaults() Platform {
	if p.OS == "" {
		p.OS = runtime.GOOS
	}
	if p.Arch == "" {
		p.Arch = runtime.GOARCH
	}
	return p
}

// BuildArgs returns the build arguments docker buildx sets for p
// (TARGETOS, TARGETARCH, BUILDPLATFORM, …), plus VERSION when version is
// not empty.
func BuildArgs(p Platform, version string) map[string]string {
	p = p.withDefaults()
	build := Platform{}.withDefaults()
	args := map[string]string{
		"TARGETOS":       p.OS,
		"TARGETARCH":     p.Arch,
		"TARGETPLATFORM": p.OS + "/" + p.Arch,
		"BUILDOS":        build.OS,
		"BUILDARCH":      build.Arch,
		"BUILDPLATFORM":  build.OS + "/" + build.Arch,
	}
	if version != "" {
		args["VERSION"] = version
	}
	return args
}

// BuildBinary runs r.Build in root, the build context, and writes the
// binary to out: the same go command, environment and flags as the
// Dockerfile's RUN, but -o out.
func BuildBinary(ctx context.Context, root string, r *Recipe, out string) error {
	b := r.Build
	if err := buildcache.GoBuildEnv(ctx, root, b.Env, b.Package, out, b.Flags...); err != nil {
		return fmt.Errorf("image: %s line %d: %w", DockerfilePath, b.Line, err)
	}
	return nil
}

// file is one entry of a layer this package writes.
type file struct {
	name     string // relative to /, with a trailing / for a directory
	mode     int64
	uid, gid int
	body     []byte
}

// layer returns a layer of files, owned as given, every time epoch. The
// tar stream, and so the layer's digest, depends only on files.
func layer(files []file, mt types.MediaType) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: epoch, Format: tar.FormatPAX}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: layer entry %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, fmt.Errorf("image: layer entry %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(mt))
}

// NonRootUID and NonRootGID are the user LocalBase defines ("nonroot", as
// in distroless images) and the chart runs the CCM as.
const (
	NonRootUID = 65532
	NonRootGID = 65532
)

// LocalBase returns a base built here, for building offline: one layer
// with what distroless/static's nonroot variant has besides CA
// certificates and time zones, namely /etc/passwd and /etc/group with
// root, nobody and nonroot (NonRootUID), nonroot's home, and a /tmp
// anyone may write to. A CCM that calls a real cloud API over TLS needs the
// CA certificates of the Dockerfile's base.
func LocalBase(p Platform) (v1.Image, error) {
	p = p.withDefaults()
	l, err := layer([]file{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, body: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o644, body: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: NonRootUID, gid: NonRootGID},
		{name: "tmp/", mode: 0o1777},
	}, types.OCILayer)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{
		Created: v1.Time{Time: epoch}, CreatedBy: "ccmkit image.LocalBase", Comment: "passwd, group, /home/nonroot, /tmp",
	}})
	if err != nil {
		return nil, fmt.Errorf("image: local base: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: local base: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = p.OS, p.Arch, v1.Time{Time: epoch}
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return mutate.ConfigFile(img, cfg)
}

// Assemble returns base with the binary at r.Binary (mode 0755, owned by
// root, so the non-root user runs it but cannot change it) as a new layer,
// and r's entrypoint, user, labels and environment in its configuration,
// for platform p.
func Assemble(r *Recipe, base v1.Image, binary string, p Platform) (v1.Image, error) {
	p = p.withDefaults()
	body, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	mt, err := base.MediaType()
	if err != nil {
		return nil, fmt.Errorf("image: base: %w", err)
	}
	lmt := types.OCILayer
	if mt == types.DockerManifestSchema2 {
		lmt = types.DockerLayer
	}
	l, err := layer([]file{{name: strings.TrimPrefix(r.Binary, "/"), mode: 0o755, body: body}}, lmt)
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{Layer: l, History: v1.History{
		Created:   v1.Time{Time: epoch},
		CreatedBy: fmt.Sprintf("COPY %s (%s line %d: go build %s)", r.Binary, DockerfilePath, r.Build.Line, r.Build.Package),
	}})
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	if cfg.OS != p.OS || cfg.Architecture != p.Arch {
		return nil, fmt.Errorf("image: base is %s/%s: expected %s/%s, the platform the binary is built for", cfg.OS, cfg.Architecture, p.OS, p.Arch)
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: epoch}
	c := &cfg.Config
	c.Entrypoint, c.Cmd, c.User = r.Entrypoint, nil, r.User
	c.Labels = maps.Clone(c.Labels)
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	maps.Copy(c.Labels, r.Labels)
	for _, e := range r.Env {
		n, _, _ := strings.Cut(e, "=")
		c.Env = append(deleteEnv(c.Env, n), e)
	}
	return mutate.ConfigFile(img, cfg)
}

func deleteEnv(env []string, name string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}

// Build loads the Dockerfile, resolves it for p and version (see
// BuildArgs), builds the binary into dir and assembles it on base (nil:
// LocalBase(p)).
func Build(ctx context.Context, dir string, p Platform, version string, base v1.Image) (v1.Image, *Recipe, error) {
	d, root, err := Load()
	if err != nil {
		return nil, nil, err
	}
	r, err := d.Recipe(BuildArgs(p, version))
	if err != nil {
		return nil, nil, err
	}
	if base == nil {
		if base, err = LocalBase(p); err != nil {
			return nil, nil, err
		}
	}
	bin := filepath.Join(dir, path.Base(r.Binary))
	if err := BuildBinary(ctx, root, r, bin); err != nil {
		return nil, nil, err
	}
	img, err := Assemble(r, base, bin, p)
	return img, r, err
}

// WriteLayout writes img as an OCI image layout in dir, which must not
// exist or be empty, annotated with ref (its org.opencontainers.image.ref.name,
// a tag such as v0.1.0) when not empty.
func WriteLayout(dir string, img v1.Image, ref string) error {
	switch entries, err := os.ReadDir(dir); {
	case err == nil && len(entries) > 0:
		return fmt.Errorf("image: layout directory %s has %d entries: expected a new or empty directory", dir, len(entries))
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("image: %w", err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	var opts []layout.Option
	if ref != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		return fmt.Errorf("image: writing layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout returns the one image of the OCI layout in dir.
func ReadLayout(dir string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("image: layout %s has %d manifests: expected one image", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

// Push writes img to the registry as ref (registry/repository:tag) with
// the credentials of the Docker config (~/.docker/config.json, as
// `docker login` leaves them), over plain HTTP when insecure, and returns
// the pushed reference by digest.
func Push(ctx context.Context, ref string, img v1.Image, insecure bool) (name.Digest, error) {
	r, err := parseRef(ref, insecure)
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.Write(r, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return name.Digest{}, fmt.Errorf("image: push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, fmt.Errorf("image: %w", err)
	}
	return r.Context().Digest(d.String()), nil
}

// Pull reads ref from its registry, for platform p when ref is a
// multi-platform index (as distroless images are).
func Pull(ctx context.Context, ref string, p Platform, insecure bool) (v1.Image, error) {
	r, err := parseRef(ref, insecure)
	if err != nil {
		return nil, err
	}
	p = p.withDefaults()
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithPlatform(v1.Platform{OS: p.OS, Architecture: p.Arch}))
	if err != nil {
		return nil, fmt.Errorf("image: pull %s: %w", ref, err)
	}
	return img, nil
}

func parseRef(ref string, insecure bool) (name.Reference, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, append(opts, name.StrictValidation)...)
	if err != nil {
		return nil, fmt.Errorf("image: reference %q: %w: expected registry/repository:tag", ref, err)
	}
	return r, nil
}
