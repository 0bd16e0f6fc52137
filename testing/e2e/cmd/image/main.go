// Command image builds the example cloud-controller-manager's image from
// example/Dockerfile without Docker (package testing/e2e/image): it runs
// the Dockerfile's go build on this machine, layers the binary on the
// Dockerfile's base (pulled from its registry) or, with -base=local, on a
// base built here, and writes the image as an OCI layout (-out), pushes it
// (-push), or both.
//
// Where a registry is reachable, the one-line build and push:
//
//	go -C testing/e2e run ./cmd/image -push registry.example.com/acme/cloud-controller-manager:v0.1.0
//
// Offline, into an OCI layout (load it with `skopeo copy oci:DIR ...` or
// `crane push DIR REF` later):
//
//	go -C testing/e2e run ./cmd/image -base=local -out /tmp/ccm-oci
//
// Credentials come from the Docker config (~/.docker/config.json, as
// `docker login` writes it); -insecure talks plain HTTP to a local
// registry.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/ccmkit/ccmkit/testing/e2e/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	out := fs.String("out", "", "write the image as an OCI layout into this new or empty `directory`")
	push := fs.String("push", "", "push the image as this `reference` (registry/repository:tag)")
	base := fs.String("base", "", "the base image `reference`, or \"local\" for one built here (offline); default: the Dockerfile's FROM")
	version := fs.String("version", "", "the VERSION build argument (--version and the version label); default: the Dockerfile's")
	platform := fs.String("platform", "", "`os/arch` to build for; default: this machine's")
	insecure := fs.Bool("insecure", false, "talk plain HTTP to the registries of -push and -base")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("arguments %q: expected flags only", fs.Args())
	}
	if *out == "" && *push == "" {
		return errors.New("neither -out nor -push: expected at least one, where to put the image")
	}
	var p image.Platform
	if *platform != "" {
		var ok bool
		if p.OS, p.Arch, ok = strings.Cut(*platform, "/"); !ok || p.OS == "" || p.Arch == "" {
			return fmt.Errorf("-platform %q: expected os/arch, such as linux/arm64", *platform)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	d, _, err := image.Load()
	if err != nil {
		return err
	}
	r, err := d.Recipe(image.BuildArgs(p, *version))
	if err != nil {
		return err
	}
	var b v1.Image
	switch *base {
	case "local":
		b, err = image.LocalBase(p)
	case "":
		b, err = image.Pull(ctx, r.Base, p, *insecure)
	default:
		b, err = image.Pull(ctx, *base, p, *insecure)
	}
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "ccmkit-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	img, _, err := image.Build(ctx, tmp, p, *version, b)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if *out != "" {
		if err := image.WriteLayout(*out, img, r.Labels["org.opencontainers.image.version"]); err != nil {
			return err
		}
		fmt.Printf("wrote %s to the OCI layout %s\n", digest, *out)
	}
	if *push != "" {
		ref, err := image.Push(ctx, *push, img, *insecure)
		if err != nil {
			return err
		}
		fmt.Printf("pushed %s\n", ref)
	}
	return nil
}
