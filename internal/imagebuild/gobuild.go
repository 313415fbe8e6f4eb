package imagebuild

import (
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// parsePlatforms reads "os/arch[/variant]" platforms, linux only.
func parsePlatforms(ss []string) ([]v1.Platform, error) {
	if len(ss) == 0 {
		ss = []string{"linux/amd64"}
	}
	seen := map[string]bool{}
	var ps []v1.Platform
	for _, s := range ss {
		p, err := v1.ParsePlatform(s)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", s, err)
		}
		if p.OS != "linux" || p.Architecture == "" || p.OSVersion != "" {
			return nil, fmt.Errorf("platform %q: want linux/<arch>[/<variant>]", s)
		}
		if _, err := goEnv(*p); err != nil {
			return nil, err
		}
		if seen[p.String()] {
			return nil, fmt.Errorf("platform %q given twice", s)
		}
		seen[p.String()] = true
		ps = append(ps, *p)
	}
	return ps, nil
}

// goEnv is the environment `go build` needs for p.
func goEnv(p v1.Platform) ([]string, error) {
	env := []string{"CGO_ENABLED=0", "GOOS=" + p.OS, "GOARCH=" + p.Architecture}
	switch {
	case p.Architecture == "arm" && p.Variant != "":
		v := strings.TrimPrefix(p.Variant, "v")
		if v != "5" && v != "6" && v != "7" {
			return nil, fmt.Errorf("platform %s: variant %q: want v5, v6 or v7", p, p.Variant)
		}
		env = append(env, "GOARM="+v)
	case p.Architecture == "amd64" && p.Variant != "":
		if p.Variant != "v1" && p.Variant != "v2" && p.Variant != "v3" && p.Variant != "v4" {
			return nil, fmt.Errorf("platform %s: variant %q: want v1 to v4", p, p.Variant)
		}
		env = append(env, "GOAMD64="+p.Variant)
	case p.Architecture == "arm64" && p.Variant != "" && p.Variant != "v8":
		return nil, fmt.Errorf("platform %s: variant %q: want v8 or none", p, p.Variant)
	}
	return env, nil
}

// goBuild builds app's static binary for p into out.
func goBuild(ctx context.Context, log io.Writer, goCmd, root string, app App, p v1.Platform, version, out string) error {
	if goCmd == "" {
		goCmd = "go"
	}
	ldflags := "-s -w"
	if app.VersionVar != "" {
		ldflags += " -X " + app.VersionVar + "=" + version
	}
	env, err := goEnv(p)
	if err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-ldflags", ldflags, "-o", out, app.Package}
	logf(log, "%s: %s %s %s", app.Name, strings.Join(env, " "), goCmd, quoteArgs(args))
	start := time.Now()
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s for %s: %w\n%s", app.Package, p, err, output)
	}
	logf(log, "%s: built %s for %s in %s", app.Name, app.Package, p, time.Since(start).Round(100*time.Millisecond))
	return nil
}

func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if strings.ContainsAny(a, " \"'") {
			q[i] = strconv.Quote(a)
		}
	}
	return strings.Join(q, " ")
}

// elfMachine is the ELF machine of a Go architecture; ok is false for one
// this package does not know.
func elfMachine(goarch string) (m elf.Machine, ok bool) {
	switch goarch {
	case "amd64":
		return elf.EM_X86_64, true
	case "arm64":
		return elf.EM_AARCH64, true
	case "arm":
		return elf.EM_ARM, true
	case "386":
		return elf.EM_386, true
	case "ppc64le":
		return elf.EM_PPC64, true
	case "s390x":
		return elf.EM_S390, true
	case "riscv64":
		return elf.EM_RISCV, true
	}
	return 0, false
}

// checkStatic refuses a binary that is not an ELF executable for p, or
// that needs a dynamic loader: the images have none.
func checkStatic(bin string, p v1.Platform) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("binary %s: %w", bin, err)
	}
	defer func() { _ = f.Close() }()
	if want, ok := elfMachine(p.Architecture); ok && f.Machine != want {
		return fmt.Errorf("binary %s is for %s, not %s", bin, f.Machine, p)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("binary %s is dynamically linked (build it with CGO_ENABLED=0)", bin)
		}
	}
	return nil
}
