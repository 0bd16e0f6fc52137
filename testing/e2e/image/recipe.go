package image

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Recipe is what a Dockerfile's final stage makes, resolved for one set of
// build arguments: the base it starts from, the binary a build stage
// compiles with `go build` and the final stage copies in, and the image
// configuration it declares.
type Recipe struct {
	// Base is the final stage's FROM reference, with the global ARGs
	// expanded.
	Base string
	// Binary is where the binary is in the image (COPY's destination).
	Binary string
	// Build is the `go build` that makes the binary.
	Build GoBuild
	// Entrypoint is ENTRYPOINT's exec form.
	Entrypoint []string
	// User is USER, as uid[:gid].
	User string
	// Labels are the LABEL instructions, expanded.
	Labels map[string]string
	// Env are the ENV instructions as NAME=value, in order.
	Env []string
}

// GoBuild is a `go build` command of a RUN instruction.
type GoBuild struct {
	// Line is the RUN instruction's line.
	Line int
	// Env are the NAME=value assignments before `go build`.
	Env []string
	// Flags are the build flags other than -o, in order.
	Flags []string
	// Output is -o's value: where the binary is in the build stage.
	Output string
	// Package is the one package it builds, relative to the build context.
	Package string
}

// Recipe resolves the final stage of d with buildArgs (TARGETOS, TARGETARCH
// and any ARG to override; VERSION, say). It fails unless the final stage
// copies exactly one file from a build stage (COPY --from=STAGE SRC DEST),
// that stage has exactly one RUN whose command is `go build -o SRC PKG`
// (after NAME=value assignments), and the final stage has an exec-form
// ENTRYPOINT and a USER.
func (d *Dockerfile) Recipe(buildArgs map[string]string) (*Recipe, error) {
	final := &d.Stages[len(d.Stages)-1]
	vars, err := d.scope(final, buildArgs)
	if err != nil {
		return nil, err
	}
	base, err := expand(final.Base, d.globalScope(buildArgs))
	if err != nil {
		return nil, fmt.Errorf("%s:%d: FROM: %w (FROM sees only the ARGs before the first FROM)", d.Name, final.Line, err)
	}
	r := &Recipe{Base: base, Labels: map[string]string{}}
	var copies int
	for _, in := range final.Instructions {
		at := fmt.Sprintf("%s:%d: %s", d.Name, in.Line, in.Command)
		switch in.Command {
		case "COPY":
			copies++
			if err := d.resolveCopy(r, in, buildArgs); err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
		case "ENTRYPOINT":
			if r.Entrypoint, err = jsonList(in.Rest); err != nil {
				return nil, fmt.Errorf("%s %w", at, err)
			}
		case "USER":
			if r.User, err = expand(in.Rest, vars); err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
		case "LABEL", "ENV":
			kv, err := pairs(in.Rest, vars)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			for i := 0; i < len(kv); i += 2 {
				if in.Command == "LABEL" {
					r.Labels[kv[i]] = kv[i+1]
				} else {
					r.Env = append(r.Env, kv[i]+"="+kv[i+1])
					vars[kv[i]] = kv[i+1]
				}
			}
		case "ARG":
		default:
			return nil, fmt.Errorf("%s: expected only ARG, ENV, LABEL, COPY --from, USER and ENTRYPOINT in the final stage", at)
		}
	}
	switch {
	case copies != 1:
		return nil, fmt.Errorf("%s:%d: the final stage has %d COPY instructions: expected one, of the binary from a build stage", d.Name, final.Line, copies)
	case r.Entrypoint == nil:
		return nil, fmt.Errorf("%s:%d: the final stage has no ENTRYPOINT: expected [%q]", d.Name, final.Line, r.Binary)
	case r.User == "":
		return nil, fmt.Errorf("%s:%d: the final stage has no USER: expected a non-root uid:gid", d.Name, final.Line)
	case r.Entrypoint[0] != r.Binary:
		return nil, fmt.Errorf("%s:%d: ENTRYPOINT runs %q: expected the copied binary %q", d.Name, final.Line, r.Entrypoint[0], r.Binary)
	}
	return r, nil
}

// resolveCopy resolves `COPY --from=STAGE SRC DEST` into r.Binary and
// r.Build.
func (d *Dockerfile) resolveCopy(r *Recipe, in Instruction, buildArgs map[string]string) error {
	from := ""
	for _, f := range in.Flags {
		if v, ok := strings.CutPrefix(f, "--from="); ok {
			from = v
			continue
		}
		return fmt.Errorf("flag %q: expected only --from=STAGE", f)
	}
	f := strings.Fields(in.Rest)
	if from == "" || len(f) != 2 || !path.IsAbs(f[1]) {
		return fmt.Errorf("%q: expected --from=STAGE SRC DEST, with one file and an absolute DEST", in.Rest)
	}
	src, dest := f[0], f[1]
	if strings.HasSuffix(dest, "/") {
		dest = path.Join(dest, path.Base(src))
	}
	stage, err := d.Stage(from)
	if err != nil {
		return err
	}
	vars, err := d.scope(stage, buildArgs)
	if err != nil {
		return err
	}
	var builds []GoBuild
	for _, rin := range stage.Instructions {
		if rin.Command != "RUN" {
			continue
		}
		b, ok, err := goBuild(rin, vars)
		if err != nil {
			return fmt.Errorf("%s:%d: RUN: %w", d.Name, rin.Line, err)
		}
		if ok {
			builds = append(builds, b)
		}
	}
	if len(builds) != 1 {
		return fmt.Errorf("stage %q has %d RUN instructions that run go build: expected one", from, len(builds))
	}
	if builds[0].Output != src {
		return fmt.Errorf("copies %q: expected the go build output of stage %q, %q (line %d)", src, from, builds[0].Output, builds[0].Line)
	}
	r.Binary, r.Build = dest, builds[0]
	return nil
}

// goBuild parses a RUN instruction's command; ok is false if it is not a
// `go build`.
func goBuild(in Instruction, vars map[string]string) (b GoBuild, ok bool, err error) {
	w, err := words(in.Rest, vars)
	if err != nil {
		return b, false, err
	}
	b.Line = in.Line
	for len(w) > 0 && strings.Contains(w[0], "=") && validName(w[0][:strings.IndexByte(w[0], '=')]) {
		b.Env = append(b.Env, w[0])
		w = w[1:]
	}
	if len(w) < 2 || w[0] != "go" || w[1] != "build" {
		return b, false, nil
	}
	args := w[2:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" && i+1 < len(args):
			b.Output = args[i+1]
			i++
		case strings.HasPrefix(a, "-o="):
			b.Output = strings.TrimPrefix(a, "-o=")
		case strings.HasPrefix(a, "-"):
			// Flags that take a separate value must be written -flag=value.
			b.Flags = append(b.Flags, a)
		case b.Package != "":
			return b, false, fmt.Errorf("go build of %q and %q: expected one package", b.Package, a)
		default:
			b.Package = a
		}
	}
	switch {
	case b.Output == "" || !path.IsAbs(b.Output):
		return b, false, fmt.Errorf("go build -o %q: expected an absolute output path", b.Output)
	case b.Package == "":
		return b, false, fmt.Errorf("go build with no package: expected one, such as ./example")
	}
	return b, true, nil
}

// pairs parses LABEL's and ENV's NAME=value list into name, value, name,
// value, ….
func pairs(s string, vars map[string]string) ([]string, error) {
	w, err := words(s, vars)
	if err != nil {
		return nil, err
	}
	var kv []string
	for _, p := range w {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: expected NAME=value pairs", p)
		}
		kv = append(kv, k, v)
	}
	return kv, nil
}

// EnvValue returns the value of the assignment NAME in env ("" if absent).
func EnvValue(env []string, name string) string {
	for _, e := range slices.Backward(env) {
		if v, ok := strings.CutPrefix(e, name+"="); ok {
			return v
		}
	}
	return ""
}
