package imagebuild

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestImagesRun builds Scribe's and the demo app's images (one build of
// each, for this machine's platform), pushes them to a registry on
// 127.0.0.1, pulls them back, unpacks each into a root and runs its binary
// as the kubelet would (the entrypoint, as the image's user, from /).
// As root it runs them chrooted into their unpacked image: there Scribe's
// binary is /scribe, the path its CUE loading once took for its own module
// root (every render failed: "open /scribe/cue.mod/local-module.cue: not a
// directory").
func TestImagesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries (-short)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the images are linux ones")
	}
	if _, err := os.Stat(DefaultCABundle); err != nil {
		t.Skipf("no CA bundle on this machine to put into the images: %v", err)
	}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	ctx := context.Background()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	asRoot := os.Geteuid() == 0

	images := map[string]*Result{}
	for _, app := range []App{Scribe(), DemoApp()} {
		var out bytes.Buffer
		start := time.Now()
		res, err := Build(ctx, Options{
			App:        app,
			ModuleRoot: repoRoot(t),
			Platforms:  []string{hostPlatform().String()},
			Version:    "v0.0.0-test",
			Revision:   "0123456789abcdef",
			Created:    created,
			Push:       host + "/" + app.Name + ":test",
			Layout:     filepath.Join(t.TempDir(), "layout"),
			Log:        &out,
		})
		if err != nil {
			t.Fatalf("build %s: %v\n%s", app.Name, err, out.String())
		}
		t.Logf("built %s in %s:\n%s", app.Name, time.Since(start).Round(time.Second), out.String())
		images[app.Name] = res
	}

	t.Run("what Build prints", func(t *testing.T) {
		res := images["scribe"]
		want := host + "/scribe@" + res.Digest.String()
		if res.Pushed != want {
			t.Errorf("Pushed = %s, want %s", res.Pushed, want)
		}
	})

	// pull pulls an image back by its tag, as a node would.
	pull := func(t *testing.T, app App) v1.Image {
		t.Helper()
		ref, err := name.ParseReference(host+"/"+app.Name+":test", name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(ref, remote.WithPlatform(hostPlatform()), remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("pull %s: %v", ref, err)
		}
		return img
	}

	t.Run("config", func(t *testing.T) {
		for _, app := range []App{Scribe(), DemoApp()} {
			cf, err := pull(t, app).ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			tests := []struct {
				what      string
				got, want any
			}{
				{"user", cf.Config.User, app.User},
				{"entrypoint", cf.Config.Entrypoint, app.Entrypoint},
				{"cmd", cf.Config.Cmd, app.Cmd},
				{"os/arch", cf.OS + "/" + cf.Architecture, hostPlatform().String()},
				{"created", cf.Created.UTC(), created},
				{"version label", cf.Config.Labels["org.opencontainers.image.version"], "v0.0.0-test"},
				{"revision label", cf.Config.Labels["org.opencontainers.image.revision"], "0123456789abcdef"},
				{"title label", cf.Config.Labels["org.opencontainers.image.title"], app.Name},
				{"source label", cf.Config.Labels["org.opencontainers.image.source"], Source},
			}
			for _, tt := range tests {
				if !reflect.DeepEqual(tt.got, tt.want) {
					t.Errorf("%s %s = %#v, want %#v", app.Name, tt.what, tt.got, tt.want)
				}
			}
		}
	})

	t.Run("the OCI layout holds the same index", func(t *testing.T) {
		for _, app := range []App{Scribe(), DemoApp()} {
			res := images[app.Name]
			idx, err := layout.ImageIndexFromPath(res.Layout)
			if err != nil {
				t.Fatal(err)
			}
			m, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Manifests) != 1 || m.Manifests[0].Digest != res.Digest || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != app.Name+":latest" {
				t.Errorf("%s layout index = %+v, want the index %s named %s:latest", app.Name, m.Manifests, res.Digest, app.Name)
			}
		}
	})

	fixture, err := os.ReadFile(filepath.Join(repoRoot(t), "fixtures", "valid", "gateway-tutorial.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	scribeRoot := unpack(t, pull(t, Scribe()))
	demoRoot := unpack(t, pull(t, DemoApp()))
	if err := os.WriteFile(filepath.Join(scribeRoot, "tmp", "experiment.yaml"), fixture, 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("the root's files", func(t *testing.T) {
		tests := []struct {
			path string
			mode os.FileMode
		}{
			{"/scribe", 0o755},
			{"/tmp", os.ModeDir | os.ModeSticky | 0o777},
			{"/etc/passwd", 0o644},
			{"/etc/group", 0o644},
			{CABundlePath, 0o644},
		}
		for _, tt := range tests {
			fi, err := os.Lstat(filepath.Join(scribeRoot, tt.path))
			if err != nil {
				t.Errorf("%s: %v", tt.path, err)
				continue
			}
			if got := fi.Mode() & (os.ModeType | os.ModePerm | os.ModeSticky); got != tt.mode {
				t.Errorf("%s: mode %s, want %s", tt.path, got, tt.mode)
			}
		}
	})

	// Each way to run: by the binary's path in the unpacked root (as any
	// user), and chrooted into it as the image's user (as root only).
	type runner struct {
		name string
		// cmd runs the image's entrypoint with args in root.
		cmd func(t *testing.T, root string, app App, args ...string) *exec.Cmd
	}
	runners := []runner{{name: "by path", cmd: func(t *testing.T, root string, app App, args ...string) *exec.Cmd {
		argv := append(append([]string{}, app.Entrypoint...), args...)
		cmd := exec.CommandContext(ctx, filepath.Join(root, argv[0]), argv[1:]...)
		cmd.Dir = root
		cmd.Env = []string{"HOME=" + filepath.Join(root, "home", "nonroot")}
		return cmd
	}}}
	if asRoot {
		runners = append(runners, runner{name: "chrooted as the image's user", cmd: func(t *testing.T, root string, app App, args ...string) *exec.Cmd {
			uid, gid, err := parseUser(app.User)
			if err != nil {
				t.Fatal(err)
			}
			argv := append(append([]string{}, app.Entrypoint...), args...)
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Path = argv[0] // resolved in the new root, not here
			cmd.Dir = "/"
			cmd.Env = []string{"HOME=" + nonrootHome, "PATH=/usr/local/bin:/usr/bin:/bin"}
			cmd.SysProcAttr = &syscall.SysProcAttr{
				Chroot:     root,
				Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
			}
			return cmd
		}})
	} else {
		t.Log("not root: the images are not run chrooted, only by their binary's path")
	}

	for _, r := range runners {
		t.Run("scribe "+r.name, func(t *testing.T) {
			fixturePath := path.Join("/tmp", "experiment.yaml")
			if r.name == "by path" {
				fixturePath = filepath.Join(scribeRoot, "tmp", "experiment.yaml")
			}
			tests := []struct {
				args []string
				want []string
			}{
				{args: []string{"version"}, want: []string{"scribe v0.0.0-test", "templates sha256:"}},
				{args: []string{"render", "-f", fixturePath}, want: []string{"kind: Kustomization", "name: gateway-tutorial"}},
			}
			for _, tt := range tests {
				out, err := r.cmd(t, scribeRoot, Scribe(), tt.args...).CombinedOutput()
				if err != nil {
					t.Fatalf("scribe %s: %v\n%s", strings.Join(tt.args, " "), err, out)
				}
				for _, w := range tt.want {
					if !bytes.Contains(out, []byte(w)) {
						t.Errorf("scribe %s: the output lacks %q:\n%s", strings.Join(tt.args, " "), w, head(out))
					}
				}
			}
		})
		t.Run("demo-app "+r.name, func(t *testing.T) {
			cmd := r.cmd(t, demoRoot, DemoApp(), "-port", "0", "-pod", "demo-0")
			runDemoApp(t, cmd)
		})
	}
}

// runDemoApp starts the demo app, asks it for / and /readyz, sends it
// SIGTERM and waits for it to stop by itself.
func runDemoApp(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()
	var port string
	portRe := regexp.MustCompile(`listening on \S*:(\d+)`)
	deadline := time.After(30 * time.Second)
	for port == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the demo app exited before it listened: %v", <-exited)
			}
			if m := portRe.FindStringSubmatch(l); m != nil {
				port = m[1]
			}
		case <-deadline:
			t.Fatal("the demo app did not say where it listens within 30 s")
		}
	}
	go func() {
		for range lines { // keep draining its log
		}
	}()
	c := http.Client{Timeout: 5 * time.Second}
	for _, tt := range []struct {
		path string
		want string
	}{
		{"/", `{"version":"v0.0.0-test","pod":"demo-0"}`},
		{"/readyz", "ready"},
	} {
		resp, err := c.Get("http://127.0.0.1:" + port + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != tt.want {
			t.Errorf("GET %s: %d %q %v, want 200 %q", tt.path, resp.StatusCode, body, err, tt.want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the demo app after SIGTERM: %v, want a clean exit", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("the demo app did not stop within 20 s of SIGTERM")
	}
}

// unpack writes img's flattened file system into a new directory, with
// the modes, and as root the owners, of its files.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	// The image's user walks into its root.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("the image has a file outside its root: %q", h.Name)
		}
		p := filepath.Join(root, h.Name)
		mode := os.FileMode(h.Mode & 0o777)
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: a file of type %q; the images have directories and regular files only", h.Name, h.Typeflag)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func head(out []byte) string {
	s := string(out)
	if len(s) > 2000 {
		return s[:2000] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}
