// Command crds finds, checks and refreshes the upstream CRD files of
// internal/crds.
//
//	go run ./hack/crds [-check] [project...]
//
// prints the paths of the CRD files of the named projects (every project
// when none is named), one per line, found by the same resolver the tests
// use: the repository's copies (internal/crds/upstream) for the projects
// the Go module proxy does not serve, else the offline mirror in
// SCRIBE_CRDS_DIR, else the pinned module in the Go module cache.
// hack/gen-schemas.sh (`make schemas`) reads its output. With -check it
// first checks every file (crds.Check: one CustomResourceDefinition per
// file, defining the kind the table lists) and prints nothing when one
// fails.
//
//	go run ./hack/crds -from-mirror DIR [project...]
//	go run ./hack/crds -from-git project=DIR [-from-git project=DIR ...]
//
// refresh the repository's copies: of the named projects (every project the
// repository carries when none is named) from an offline mirror laid out
// like internal/crds/upstream (DIR/<folder>/<file>), or of each named
// project from a git repository of its upstream, a clone or a bare one,
// read at the commit internal/crds pins (git cat-file). Every new file is
// checked before any is written, and nothing is written when one fails.
// Each file is reported as "updated" or "unchanged". No test runs a
// refresh.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/scribe-gitops/scribe/internal/crds"
)

func main() {
	var (
		check      bool
		fromMirror string
		fromGit    = map[string]string{}
	)
	flag.BoolVar(&check, "check", false, "check the files before printing them: one CustomResourceDefinition per file, the kinds of the table")
	flag.StringVar(&fromMirror, "from-mirror", "", "refresh the repository's copies from the offline mirror `DIR` (one folder per project)")
	flag.Func("from-git", "refresh a project's copies from its upstream git repository, `project=DIR`, read at the pinned commit (repeatable)", func(v string) error {
		name, dir, ok := strings.Cut(v, "=")
		if !ok || name == "" || dir == "" {
			return fmt.Errorf("%q: want project=DIR", v)
		}
		if _, dup := fromGit[name]; dup {
			return fmt.Errorf("%s is named twice", name)
		}
		fromGit[name] = dir
		return nil
	})
	flag.Usage = func() {
		out := flag.CommandLine.Output()
		_, _ = fmt.Fprintf(out, "usage:\n  crds [-check] [project...]\n  crds -from-mirror DIR [project...]\n  crds -from-git project=DIR [-from-git project=DIR ...]\nprojects: %s\n", strings.Join(crds.Names(), " "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := dispatch(context.Background(), os.Stdout, check, fromMirror, fromGit, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "crds:", err)
		os.Exit(1)
	}
}

// dispatch runs the mode the flags ask for.
func dispatch(ctx context.Context, w io.Writer, check bool, fromMirror string, fromGit map[string]string, args []string) error {
	if fromMirror == "" && len(fromGit) == 0 {
		r, err := crds.FromEnv()
		if err != nil {
			return err
		}
		return run(ctx, w, r, args, check)
	}
	switch {
	case fromMirror != "" && len(fromGit) > 0:
		return errors.New("-from-mirror and -from-git: refresh from one source at a time")
	case check:
		return errors.New("-check prints files; a refresh checks what it copies anyway")
	case len(fromGit) > 0 && len(args) > 0:
		return fmt.Errorf("-from-git names its projects; unexpected arguments %v", args)
	}
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("refresh: %w", err)
	}
	repo, err := crds.FindRepo(wd)
	if err != nil {
		return err
	}
	if repo == "" {
		return fmt.Errorf("refresh: %s is not inside the Scribe repository", wd)
	}
	if fromMirror != "" {
		dir, err := filepath.Abs(fromMirror)
		if err != nil {
			return fmt.Errorf("refresh: %w", err)
		}
		projects, err := carried(args)
		if err != nil {
			return err
		}
		return refresh(ctx, w, repo, projects, mirrorSource(dir))
	}
	var names []string
	for name := range fromGit {
		names = append(names, name)
	}
	projects, err := carried(names)
	if err != nil {
		return err
	}
	return refresh(ctx, w, repo, projects, gitSource(fromGit))
}

// run writes the CRD files of projects (all when empty) to w, after
// checking them when check is set. Nothing is written when one of them
// cannot be found or fails its check.
func run(ctx context.Context, w io.Writer, r crds.Resolver, projects []string, check bool) error {
	if len(projects) == 0 {
		projects = crds.Names()
	}
	files, err := r.Files(ctx, projects...)
	if err != nil {
		return err
	}
	if check {
		// Files returns each project's files in turn, in table order.
		table := map[string]crds.Project{}
		for _, p := range crds.Projects() {
			table[p.Name] = p
		}
		var errs []error
		rest := files
		for _, name := range projects {
			p := table[name]
			errs = append(errs, crds.CheckFiles(p, rest[:len(p.Files)]))
			rest = rest[len(p.Files):]
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	for _, f := range files {
		if _, err := fmt.Fprintln(w, f); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	return nil
}

// carried returns the named projects (every project the repository
// carries when none is named), in table order. A name that is unknown, or
// of a project the Go module proxy serves, is an error.
func carried(names []string) ([]crds.Project, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []crds.Project
	for _, p := range crds.Projects() {
		if len(names) > 0 && !want[p.Name] {
			continue
		}
		delete(want, p.Name)
		switch {
		case p.InRepo():
			out = append(out, p)
		case len(names) > 0:
			return nil, fmt.Errorf("%s comes from the Go module proxy (%s@%s); the repository does not carry it", p.Name, p.Module, p.Version)
		}
	}
	if len(want) > 0 {
		unknown := slices.Sorted(maps.Keys(want))
		return nil, fmt.Errorf("unknown upstream project %s (known: %s)", strings.Join(unknown, ", "), strings.Join(crds.Names(), ", "))
	}
	return out, nil
}

// source reads file, one of p's CRD files, from where a refresh copies it.
type source func(ctx context.Context, p crds.Project, file string) ([]byte, error)

// mirrorSource reads from an offline mirror: dir/<p.Mirror>/<file>.
func mirrorSource(dir string) source {
	return func(_ context.Context, p crds.Project, file string) ([]byte, error) {
		data, err := os.ReadFile(filepath.Join(dir, p.Mirror, file))
		if err != nil {
			return nil, fmt.Errorf("mirror: %w", err)
		}
		return data, nil
	}
}

// gitSource reads from the git repository named for each project, at the
// commit the table pins: <p.Path>/<file> as git stores it, with no
// conversion of line endings.
func gitSource(dirs map[string]string) source {
	return func(ctx context.Context, p crds.Project, file string) ([]byte, error) {
		dir, ok := dirs[p.Name]
		if !ok {
			return nil, fmt.Errorf("no git repository for %s", p.Name)
		}
		object := p.Commit + ":" + path.Join(p.Path, file)
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "git", "-C", dir, "cat-file", "blob", object)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("git -C %s cat-file blob %s (%s %s): %w: %s", dir, object, p.Upstream, p.Version, err, strings.TrimSpace(stderr.String()))
		}
		return stdout.Bytes(), nil
	}
}

// refresh reads every file of projects from src, checks them all, and only
// then writes those that differ into repo/<p.Mirror>/, reporting each file
// to w as updated or unchanged.
func refresh(ctx context.Context, w io.Writer, repo string, projects []crds.Project, src source) error {
	type file struct {
		rel  string
		data []byte
	}
	var files []file
	var errs []error
	for _, p := range projects {
		data := make([][]byte, len(p.Files))
		for i, f := range p.Files {
			d, err := src(ctx, p, f)
			if err != nil {
				return fmt.Errorf("refresh %s: %s: %w; nothing written", p.Name, f, err)
			}
			data[i] = d
		}
		if err := crds.Check(p, data); err != nil {
			errs = append(errs, err)
			continue
		}
		for i, f := range p.Files {
			files = append(files, file{rel: filepath.Join(p.Mirror, f), data: data[i]})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("refresh: %w; nothing written", err)
	}
	for _, f := range files {
		changed, err := writeIfChanged(filepath.Join(repo, f.rel), f.data)
		if err != nil {
			return fmt.Errorf("refresh: %w", err)
		}
		state := "unchanged"
		if changed {
			state = "updated"
		}
		if _, err := fmt.Fprintf(w, "%s %s\n", state, filepath.ToSlash(f.rel)); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	return nil
}

// writeIfChanged makes name hold data (mode 0644), replacing it at once
// through a temporary file beside it, unless it already does.
func writeIfChanged(name string, data []byte) (bool, error) {
	old, err := os.ReadFile(name)
	switch {
	case err == nil && bytes.Equal(old, data):
		return false, nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return false, err
	}
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, ".refresh-*")
	if err != nil {
		return false, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return false, fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return false, err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return false, err
	}
	return true, nil
}
