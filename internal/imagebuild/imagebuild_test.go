package imagebuild

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// repoRoot is the module's root, two levels up from this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// dockerfileStage is what the final stage of a Dockerfile says about the
// image.
type dockerfileStage struct {
	from       string
	copySrc    string
	copyDst    string
	user       string
	entrypoint []string
	cmd        []string
	// From the build stage's `go build`: the package and the version
	// variable it sets.
	pkg        string
	versionVar string
}

// parseDockerfile reads the instructions of a Dockerfile (continuation
// lines joined, comments dropped) and keeps what its final stage says.
func parseDockerfile(t *testing.T, text string) dockerfileStage {
	t.Helper()
	var lines []string
	var cur strings.Builder
	for _, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	var st dockerfileStage
	jsonArray := func(instr, s string) []string {
		var a []string
		if err := json.Unmarshal([]byte(s), &a); err != nil {
			t.Fatalf("%s %s: not a JSON array (exec form): %v", instr, s, err)
		}
		return a
	}
	buildRe := regexp.MustCompile(`go build .*-X (\S+)=\$\{?VERSION\}?.* (\./\S+)$`)
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			// A new stage: forget what the one before said.
			st = dockerfileStage{from: rest, pkg: st.pkg, versionVar: st.versionVar}
		case "RUN":
			if m := buildRe.FindStringSubmatch(rest); m != nil {
				st.versionVar, st.pkg = m[1], m[2]
			}
		case "COPY":
			var args []string
			for _, f := range strings.Fields(rest) {
				if !strings.HasPrefix(f, "--") {
					args = append(args, f)
				}
			}
			if len(args) < 2 {
				t.Fatalf("COPY %s: want a source and a destination", rest)
			}
			st.copySrc, st.copyDst = strings.Join(args[:len(args)-1], " "), args[len(args)-1]
		case "USER":
			st.user = rest
		case "ENTRYPOINT":
			st.entrypoint = jsonArray(instr, rest)
		case "CMD":
			st.cmd = jsonArray(instr, rest)
		}
	}
	return st
}

// TestDockerfileMatchesScribe keeps the Dockerfile's final stage and the
// image this package builds the same: where the binary goes, whom it runs
// as, how it starts, which package it is and which variable holds its
// version.
func TestDockerfileMatchesScribe(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	st := parseDockerfile(t, string(data))
	app := Scribe()
	tests := []struct {
		what       string
		dockerfile any
		imagebuild any
	}{
		{"the binary's path (COPY destination)", st.copyDst, app.Binary},
		{"the user (USER)", st.user, app.User},
		{"the entrypoint (ENTRYPOINT)", st.entrypoint, app.Entrypoint},
		{"the command (CMD)", st.cmd, app.Cmd},
		{"the Go package (go build)", st.pkg, app.Package},
		{"the version variable (go build -X)", st.versionVar, app.VersionVar},
		{"the nonroot user of the base (distroless static:nonroot)", strings.HasSuffix(st.from, ":nonroot") && strings.Contains(st.from, "distroless/static"), app.User == "65532:65532"},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.dockerfile, tt.imagebuild) {
			t.Errorf("%s: the Dockerfile says %#v, imagebuild.Scribe() %#v", tt.what, tt.dockerfile, tt.imagebuild)
		}
	}
}

func TestParseDockerfile(t *testing.T) {
	const df = `# comment
FROM golang AS build
RUN CGO_ENABLED=0 \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/x ./cmd/x
FROM scratch
COPY --from=build /out/x /x
USER 1:2
ENTRYPOINT ["/x"]
CMD ["serve", "--flag"]
`
	got := parseDockerfile(t, df)
	want := dockerfileStage{from: "scratch", copySrc: "/out/x", copyDst: "/x", user: "1:2",
		entrypoint: []string{"/x"}, cmd: []string{"serve", "--flag"}, pkg: "./cmd/x", versionVar: "main.version"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseDockerfile = %+v, want %+v", got, want)
	}
}

func TestNamesRegistry(t *testing.T) {
	tests := []struct {
		ref            string
		names, loopbak bool
	}{
		{ref: "scribe:latest"},
		{ref: "scribe"},
		{ref: "team/scribe:v1"},
		{ref: "127.0.0.1:5000/scribe:dev", names: true, loopbak: true},
		{ref: "localhost:5000/scribe", names: true, loopbak: true},
		{ref: "localhost/scribe", names: true, loopbak: true},
		{ref: "[::1]:5000/scribe", names: true, loopbak: true},
		{ref: "127.0.0.2:80/a/b", names: true, loopbak: true},
		{ref: "ghcr.io/example/scribe:v1", names: true},
		{ref: "registry:5000/scribe", names: true},
		{ref: "10.0.0.1:5000/scribe", names: true},
	}
	for _, tt := range tests {
		if got := NamesRegistry(tt.ref); got != tt.names {
			t.Errorf("NamesRegistry(%q) = %v, want %v", tt.ref, got, tt.names)
		}
		if got := IsLoopbackRegistry(tt.ref); got != tt.loopbak {
			t.Errorf("IsLoopbackRegistry(%q) = %v, want %v", tt.ref, got, tt.loopbak)
		}
	}
}

func TestParsePushReference(t *testing.T) {
	tests := []struct {
		ref        string
		wantScheme string
		wantErr    string
	}{
		{ref: "127.0.0.1:5000/scribe:dev", wantScheme: "http"},
		{ref: "localhost:5000/scribe:dev", wantScheme: "http"},
		{ref: "ghcr.io/example/scribe:v1", wantScheme: "https"},
		{ref: "scribe:latest", wantErr: "names no registry"},
		{ref: "ghcr.io/Example/scribe", wantErr: "push to"},
	}
	for _, tt := range tests {
		r, err := ParsePushReference(tt.ref)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePushReference(%q) = %v, want an error containing %q", tt.ref, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePushReference(%q): %v", tt.ref, err)
			continue
		}
		if got := r.Context().Scheme(); got != tt.wantScheme {
			t.Errorf("ParsePushReference(%q) scheme %s, want %s", tt.ref, got, tt.wantScheme)
		}
	}
}

func TestBuildRefuses(t *testing.T) {
	bad := func(f func(*App)) App { a := Scribe(); f(&a); return a }
	host := hostPlatform().String()
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "no app", opts: Options{}, wantErr: "no name"},
		{name: "a relative binary path", opts: Options{App: bad(func(a *App) { a.Binary = "scribe" })}, wantErr: "not a clean absolute"},
		{name: "the root as the binary", opts: Options{App: bad(func(a *App) { a.Binary = "/" })}, wantErr: "not a clean absolute"},
		{name: "a user by name", opts: Options{App: bad(func(a *App) { a.User = "nonroot" })}, wantErr: "numeric uid:gid"},
		{name: "no entrypoint", opts: Options{App: bad(func(a *App) { a.Entrypoint = nil })}, wantErr: "no entrypoint"},
		{name: "a windows platform", opts: Options{App: Scribe(), Platforms: []string{"windows/amd64"}}, wantErr: "want linux"},
		{name: "a platform twice", opts: Options{App: Scribe(), Platforms: []string{"linux/amd64", "linux/amd64"}}, wantErr: "twice"},
		{name: "a bad arm variant", opts: Options{App: Scribe(), Platforms: []string{"linux/arm/v9"}}, wantErr: "variant"},
		{name: "a prebuilt binary for two platforms", opts: Options{App: Scribe(), Binary: "x", Platforms: []string{"linux/amd64", "linux/arm64"}}, wantErr: "one platform"},
		{name: "a version with a space", opts: Options{App: Scribe(), Version: "v1 -X main.x=y"}, wantErr: "version"},
		{name: "a push without a registry", opts: Options{App: Scribe(), Push: "scribe:dev"}, wantErr: "names no registry"},
		{name: "a CA bundle that is missing", opts: Options{App: Scribe(), ModuleRoot: ".", CABundle: filepath.Join(t.TempDir(), "missing.crt")}, wantErr: "CA bundle"},
		{name: "a CA bundle without certificates", opts: Options{App: Scribe(), ModuleRoot: ".", CABundle: writeFile(t, "not a certificate")}, wantErr: "no PEM certificate"},
		{name: "a binary that is no executable", opts: Options{App: Scribe(), CABundle: fakeCABundle(t), Binary: "imagebuild.go", Platforms: []string{host}}, wantErr: "binary imagebuild.go"},
	}
	if dyn := dynamicBinary(t); dyn != "" {
		tests = append(tests, struct {
			name    string
			opts    Options
			wantErr string
		}{name: "a dynamically linked binary", opts: Options{App: Scribe(), CABundle: fakeCABundle(t), Binary: dyn, Platforms: []string{host}}, wantErr: "dynamically linked"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(context.Background(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Build = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// hostPlatform is this machine's linux platform.
func hostPlatform() v1.Platform { return v1.Platform{OS: "linux", Architecture: runtime.GOARCH} }

// dynamicBinary is a dynamically linked executable of this machine, or ""
// when there is none to be found.
func dynamicBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/bin/sh", "/usr/bin/env", "/bin/ls"} {
		if err := checkStatic(p, hostPlatform()); err != nil && strings.Contains(err.Error(), "dynamically linked") {
			return p
		}
	}
	return ""
}

// fakeCABundle writes a file that looks like a CA bundle.
func fakeCABundle(t *testing.T) string {
	t.Helper()
	return writeFile(t, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
}

func writeFile(t *testing.T, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBaseLayer: the files distroless/static gives, with their owners and
// modes.
func TestBaseLayer(t *testing.T) {
	l, _, err := baseLayer(fakeCABundle(t), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	got := map[string]*tar.Header{}
	contents := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		contents[h.Name] = string(data)
	}
	tests := []struct {
		name     string
		mode     int64
		uid      int
		contains string
	}{
		{name: "etc/passwd", mode: 0o644, contains: "nonroot:x:65532:65532:nonroot:" + nonrootHome + ":"},
		{name: "etc/group", mode: 0o644, contains: "nonroot:x:65532:"},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, contains: "BEGIN CERTIFICATE"},
		{name: "etc/nsswitch.conf", mode: 0o644, contains: "hosts: files dns"},
		{name: "tmp/", mode: 0o1777},
		{name: "home/nonroot/", mode: 0o700, uid: 65532},
	}
	for _, tt := range tests {
		h := got[tt.name]
		if h == nil {
			t.Errorf("%s: not in the layer", tt.name)
			continue
		}
		if h.Mode != tt.mode || h.Uid != tt.uid || !strings.Contains(contents[tt.name], tt.contains) {
			t.Errorf("%s: mode %o uid %d content %q; want mode %o uid %d containing %q", tt.name, h.Mode, h.Uid, contents[tt.name], tt.mode, tt.uid, tt.contains)
		}
	}
}
