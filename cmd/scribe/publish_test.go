package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/ocisink"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
	"github.com/scribe-gitops/scribe/render"
)

// canary is a single valid fixture, for tests that need any render at all.
var canary = filepath.Join(fixtures, "valid", "workload-canary-50.yaml")

// clearGitEnv unsets the credential variables for the test, so that the
// caller's environment does not leak into it.
func clearGitEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{envGitUsername, envGitPassword, envGitToken} {
		t.Setenv(k, "")
	}
}

func branchHead(t *testing.T, srv *publishtest.GitServer, repo, branch string) string {
	t.Helper()
	return publishtest.Git(t, "", "--git-dir", srv.BareDir(repo), "rev-parse", "refs/heads/"+branch)
}

// readTree returns every file below root by its slash path relative to root.
func readTree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var gitReport = regexp.MustCompile(`^published (\d+) objects? to (\S+) main@sha1:([0-9a-f]{40}) \((changed|unchanged)\)\n$`)

func TestPublishFixturesToGitIsOneCommitWithTrailersAndIdempotent(t *testing.T) {
	clearGitEnv(t)
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	before := branchHead(t, srv, "exp", "main")
	// The Experiments among the fixtures go at their first commit stage.
	args := []string{"publish", "-f", filepath.Join(fixtures, "valid"), "--git", url, "--path", "clusters/dev", "--cache-dir", t.TempDir(), "--stage", "1",
		"--author-name", "CI Bot", "--author-email", "ci@example.com", "--message-template", "ci: publish {{len .Changes}} objects to {{.Path}}"}

	code, stdout, stderr := scribe(t, args...)
	if code != exitOK {
		t.Fatalf("publish: exit %d: %s", code, stderr)
	}
	m := gitReport.FindStringSubmatch(stdout)
	if m == nil || m[1] != "7" || m[2] != url || m[4] != "changed" {
		t.Fatalf("report %q does not say 7 objects were published to %s and changed", stdout, url)
	}
	head := branchHead(t, srv, "exp", "main")
	if m[3] != head {
		t.Fatalf("reported commit %s, branch is at %s", m[3], head)
	}
	if parent := publishtest.Git(t, "", "--git-dir", srv.BareDir("exp"), "rev-parse", head+"^"); parent != before {
		t.Fatalf("the publish is not one commit on top of %s: parent %s", before, parent)
	}

	// The clone holds exactly what scribe render writes, under the path,
	// and keeps the files Scribe does not own.
	rendered := filepath.Join(t.TempDir(), "rendered")
	if code, _, stderr := scribe(t, "render", "-f", filepath.Join(fixtures, "valid"), "--path", "clusters/dev", "--stage", "1", "-o", rendered); code != exitOK {
		t.Fatalf("render: exit %d: %s", code, stderr)
	}
	want := readTree(t, rendered)
	// The -o ownership marker is the local directory's, not the repository's.
	if _, ok := want[publish.OutputMarker]; !ok {
		t.Errorf("render -o wrote no %s", publish.OutputMarker)
	}
	delete(want, publish.OutputMarker)
	clone := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", "--branch", "main", url, clone)
	if _, err := os.Stat(filepath.Join(clone, "README.md")); err != nil {
		t.Errorf("the publish removed a file Scribe does not own: %v", err)
	}
	got := readTree(t, filepath.Join(clone, "clusters", "dev"))
	for p, data := range want {
		if !bytes.Equal(got[p], data) {
			t.Errorf("%s: the clone differs from scribe render's output", p)
		}
	}
	// Plus the sync index a root applier object points at.
	if idx := string(got["kustomization.yaml"]); strings.Count(idx, ".sync.yaml\n") != 7 {
		t.Errorf("the sync index does not list the 7 sync files:\n%s", idx)
	}
	if len(got) != len(want)+1 {
		t.Errorf("the clone has %d files under clusters/dev, scribe render wrote %d plus the index", len(got), len(want))
	}

	if got := publishtest.Git(t, clone, "log", "-1", "--format=%an <%ae> %s"); got != "CI Bot <ci@example.com> ci: publish 7 objects to clusters/dev" {
		t.Errorf("commit author and subject %q do not follow --author-name, --author-email and --message-template", got)
	}

	// One trailer block per custom resource, naming it and its digest.
	var wantRefs []string
	for p, data := range want {
		if strings.HasSuffix(p, "/.scribe.json") {
			var prov render.Provenance
			if err := json.Unmarshal(data, &prov); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			wantRefs = append(wantRefs, publish.ObjectRef(prov.Source))
		}
	}
	var gotRefs []string
	for _, tr := range gitsink.Trailers(publishtest.Git(t, clone, "log", "-1", "--format=%B")) {
		gotRefs = append(gotRefs, tr[gitsink.TrailerObject])
		if !strings.HasPrefix(tr[gitsink.TrailerDigest], "sha256:") {
			t.Errorf("trailers of %s have no digest: %v", tr[gitsink.TrailerObject], tr)
		}
	}
	slices.Sort(wantRefs)
	slices.Sort(gotRefs)
	if len(wantRefs) != 7 || !slices.Equal(gotRefs, wantRefs) {
		t.Errorf("commit trailers name %v, want %v", gotRefs, wantRefs)
	}

	// The same input again changes nothing.
	code, stdout, stderr = scribe(t, args...)
	if code != exitOK {
		t.Fatalf("second publish: exit %d: %s", code, stderr)
	}
	if m := gitReport.FindStringSubmatch(stdout); m == nil || m[3] != head || m[4] != "unchanged" {
		t.Fatalf("second publish reported %q, want unchanged at %s", stdout, head)
	}
	if again := branchHead(t, srv, "exp", "main"); again != head {
		t.Fatalf("second publish moved the branch from %s to %s", head, again)
	}

	// The branch holds stage 1 of the Experiments: stage 3 is refused,
	// stage 2 is the next commit (read from the branch's tip).
	stage := func(n string) []string {
		a := slices.Clone(args)
		a[slices.Index(a, "--stage")+1] = n
		return a
	}
	if code, _, stderr := scribe(t, stage("3")...); code != exitError || !strings.Contains(stderr, "the target does not hold what stage 2 of Experiment/") {
		t.Fatalf("--stage 3 after stage 1: exit %d, want 2 saying the branch lacks stage 2:\n%s", code, stderr)
	}
	if again := branchHead(t, srv, "exp", "main"); again != head {
		t.Fatalf("a refused stage moved the branch from %s to %s", head, again)
	}
	if code, _, stderr := scribe(t, stage("2")...); code != exitOK {
		t.Fatalf("--stage 2 after stage 1: exit %d: %s", code, stderr)
	}
}

// TestPublishCommitsAnExperimentOneStageAtATime: an Experiment is
// published at the stage asked for (--stage), and stage N only when the
// target holds what stage N-1 delivers, so its Workflow never lands with
// the clusters it runs on; a stage published again, or an earlier one, is
// accepted.
func TestPublishCommitsAnExperimentOneStageAtATime(t *testing.T) {
	file := filepath.Join(fixtures, "valid", "gateway-tutorial.yaml")
	out := filepath.Join(t.TempDir(), "repo")
	dir := filepath.Join(out, "exp", "experiments", "experiment", "gateway-tutorial")
	holds := func(kind string) bool {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), "\nkind: "+kind+"\n") || strings.HasPrefix(string(data), "kind: "+kind+"\n") {
				return true
			}
		}
		return false
	}
	for _, step := range []struct {
		stage             string
		code              int
		want              string
		cluster, workflow bool
	}{
		{"", exitError, "pass --stage 1 (clusters)", false, false},
		{"2", exitError, "--stage 2: the target does not hold what stage 1 of Experiment/experiments/gateway-tutorial delivers (Cluster experiments/gateway-tutorial-app, ", false, false},
		{"1", exitOK, "", true, false},
		{"4", exitError, "--stage 4: the target does not hold what stage 3 of Experiment/experiments/gateway-tutorial delivers", true, false},
		{"2", exitOK, "", true, false},
		{"2", exitOK, "", true, false},
		{"3", exitOK, "", true, false},
		{"4", exitOK, "", true, true},
		{"4", exitOK, "", true, true},
		{"3", exitOK, "", true, false},
	} {
		args := []string{"publish", "-f", file, "-o", out, "--path", "exp"}
		if step.stage != "" {
			args = append(args, "--stage", step.stage)
		}
		code, _, stderr := scribe(t, args...)
		if code != step.code || !strings.Contains(stderr, step.want) {
			t.Fatalf("--stage %q: exit %d, want %d with %q:\n%s", step.stage, code, step.code, step.want, stderr)
		}
		if c, w := holds("Cluster"), holds("Workflow"); c != step.cluster || w != step.workflow {
			t.Fatalf("after --stage %q the directory holds a Cluster: %v, a Workflow: %v; want %v, %v", step.stage, c, w, step.cluster, step.workflow)
		}
	}
}

func TestPublishToGitAuthenticatesFromSecretDirAndEnvironment(t *testing.T) {
	type server int
	const (
		basic server = iota
		bearer
	)
	for _, tc := range []struct {
		name     string
		server   server
		files    map[string]string // --secret-dir content; nil for no flag
		env      map[string]string
		wantCode int
		wantErr  string
	}{
		{name: "basic auth from secret dir", server: basic, files: map[string]string{"username": "ci", "password": "s3cret\n"}, wantCode: exitOK},
		{name: "bearer token from SCRIBE_GIT_TOKEN", server: bearer, env: map[string]string{envGitToken: "t0ken"}, wantCode: exitOK},
		{name: "environment overrides the secret dir", server: basic, files: map[string]string{"username": "ci", "password": "old"}, env: map[string]string{envGitPassword: "s3cret"}, wantCode: exitOK},
		{name: "wrong password is an authentication failure", server: basic, files: map[string]string{"username": "ci", "password": "wrong"}, wantCode: exitPublishFailed, wantErr: "authentication"},
		{name: "wrong token is an authentication failure", server: bearer, env: map[string]string{envGitToken: "wrong"}, wantCode: exitPublishFailed, wantErr: "authentication"},
		{name: "no credentials is an authentication failure", server: bearer, wantCode: exitPublishFailed, wantErr: "authentication"},
		{name: "username without password is bad input", server: basic, files: map[string]string{"username": "ci"}, wantCode: exitError, wantErr: `"username" is set but "password" is empty`},
		{name: "token and username together are bad input", server: bearer, files: map[string]string{"username": "ci"}, env: map[string]string{envGitToken: "t0ken"}, wantCode: exitError, wantErr: "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearGitEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			srv := publishtest.NewGitServer(t)
			url := srv.InitRepo(t, "exp", "main")
			switch tc.server {
			case basic:
				srv.RequireBasicAuth("ci", "s3cret")
			case bearer:
				srv.RequireBearerToken("t0ken")
			}
			before := branchHead(t, srv, "exp", "main")
			args := []string{"publish", "-f", canary, "--git", url, "--cache-dir", t.TempDir()}
			if tc.files != nil {
				dir := t.TempDir()
				for k, v := range tc.files {
					if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				args = append(args, "--secret-dir", dir)
			}
			code, stdout, stderr := scribe(t, args...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, stdout, stderr)
			}
			if !strings.Contains(strings.ToLower(stderr), strings.ToLower(tc.wantErr)) {
				t.Fatalf("stderr does not mention %q:\n%s", tc.wantErr, stderr)
			}
			after := branchHead(t, srv, "exp", "main")
			if pushed := after != before; pushed != (tc.wantCode == exitOK) {
				t.Fatalf("branch moved: %v, want %v (stdout %q)", pushed, tc.wantCode == exitOK, stdout)
			}
			if tc.wantCode == exitError && srv.Requests() != 0 {
				t.Fatalf("bad credentials configuration still contacted the server %d times", srv.Requests())
			}
		})
	}
}

func TestPublishWithAnInvalidCustomResourcePublishesNothing(t *testing.T) {
	clearGitEnv(t)
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	before := branchHead(t, srv, "exp", "main")
	invalid := filepath.Join(fixtures, "invalid", "hpa-max-below-min.yaml")

	code, stdout, stderr := scribe(t, "publish", "-f", canary, "-f", invalid, "--git", url, "--cache-dir", t.TempDir())
	if code != exitError {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitError, stdout, stderr)
	}
	if !strings.Contains(stderr, "hpa-max-below-min.yaml") || stdout != "" {
		t.Fatalf("want the invalid file named on stderr and nothing on stdout:\nstdout: %s\nstderr: %s", stdout, stderr)
	}
	if after := branchHead(t, srv, "exp", "main"); after != before {
		t.Fatalf("the branch moved from %s to %s although a custom resource failed", before, after)
	}
	if srv.Requests() != 0 {
		t.Fatalf("the server was contacted %d times although a custom resource failed", srv.Requests())
	}
}

func TestPublishFlagErrorsAreBadInputAndNameTheFlags(t *testing.T) {
	clearGitEnv(t)
	out := t.TempDir()
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no target", nil, "exactly one of --git, --oci or -o/--output is required"},
		{"two targets", []string{"--git", "http://127.0.0.1:1/x.git", "-o", out}, "exactly one of --git, --oci or -o/--output is required"},
		{"git flag with oci", []string{"--oci", "oci://127.0.0.1:1/x", "--branch", "dev"}, "--branch applies only to --git"},
		{"oci flag with git", []string{"--git", "http://127.0.0.1:1/x.git", "--insecure"}, "--insecure applies only to --oci"},
		{"secret dir with output", []string{"-o", out, "--secret-dir", out}, "--secret-dir applies only to --git or --oci"},
		{"path outside the repository", []string{"-o", out, "--path", "../up"}, `--path "../up" must be a relative path inside the repository`},
		{"oci URL without scheme", []string{"--oci", "127.0.0.1:1/x"}, "must start with oci://"},
		{"missing secret dir", []string{"--git", "http://127.0.0.1:1/x.git", "--secret-dir", filepath.Join(out, "nope")}, "--secret-dir"},
		{"git source kind with oci", []string{"--oci", "oci://127.0.0.1:1/x", "--source-kind", "GitRepository"}, "use OCIRepository with --oci"},
		{"only an author name", []string{"--git", "http://127.0.0.1:1/x.git", "--author-name", "CI"}, "--author-name and --author-email go together"},
		{"unsupported git scheme", []string{"--git", "ftp://127.0.0.1/x.git"}, `unsupported scheme "ftp"`},
		{"git:// is refused", []string{"--git", "git://127.0.0.1/x.git"}, `unsupported scheme "git"`},
		{"invalid branch", []string{"--git", "http://127.0.0.1:1/x.git", "--branch", "a..b"}, `--branch "a..b" is not a valid branch name`},
		{"a tag is not a branch", []string{"--git", "http://127.0.0.1:1/x.git", "--branch", "refs/tags/v1"}, `--branch "refs/tags/v1" is not a valid branch name`},
		{"Argo CD revision that is no branch", []string{"--git", "http://127.0.0.1:1/x.git", "--applier", "ArgoCD", "--revision", "x.lock"}, `--revision: --branch "x.lock" is not a valid branch name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := scribe(t, append([]string{"publish", "-f", canary}, tc.args...)...)
			if code != exitError || !strings.Contains(stderr, tc.wantErr) || stdout != "" {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, exitError, tc.wantErr, stdout, stderr)
			}
		})
	}
}

func TestPublishToOCIRegistryPrintsTheManifestDigest(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "ci" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	artifact := "oci://" + host + "/scribe/exp:v1"
	dockerConfig := func(password string) string {
		p := filepath.Join(t.TempDir(), "config.json")
		doc := `{"auths":{"` + host + `":{"username":"ci","password":"` + password + `"}}}`
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	args := []string{"publish", "-f", canary, "--oci", artifact, "--insecure", "--path", "deploy"}

	code, _, stderr := scribe(t, append(args, "--docker-config", dockerConfig("wrong"))...)
	if code != exitPublishFailed || !strings.Contains(stderr, "AuthenticationFailed") {
		t.Fatalf("wrong registry password: exit %d, want %d naming the authentication failure\nstderr: %s", code, exitPublishFailed, stderr)
	}

	good := dockerConfig("s3cret")
	code, stdout, stderr := scribe(t, append(args, "--docker-config", good)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m := regexp.MustCompile(`^published 1 object to (\S+) v1@(sha256:[0-9a-f]{64}) \(changed\)\n$`).FindStringSubmatch(stdout)
	if m == nil || m[1] != artifact {
		t.Fatalf("report %q does not name %s and a digest", stdout, artifact)
	}
	ref, err := name.ParseReference(host+"/scribe/exp:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref, remote.WithAuth(&authn.Basic{Username: "ci", Password: "s3cret"}))
	if err != nil {
		t.Fatalf("head %s: %v", ref, err)
	}
	if desc.Digest.String() != m[2] {
		t.Fatalf("reported digest %s, the registry has %s", m[2], desc.Digest)
	}

	// The artifact holds the bundle under --path, synced by an OCIRepository.
	doc, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := ocisink.New(ocisink.Options{URL: artifact, Insecure: true, DockerConfigJSON: doc})
	if err != nil {
		t.Fatal(err)
	}
	files, err := sink.Fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["deploy/shop/workload/checkout/kustomization.yaml"]; !ok {
		t.Fatalf("artifact lacks the bundle under deploy/: %v", slices.Sorted(maps.Keys(files)))
	}
	if sync := string(files["deploy/shop/workload/checkout.sync.yaml"]); !strings.Contains(sync, "kind: OCIRepository") || !strings.Contains(sync, "path: ./deploy/shop/workload/checkout") {
		t.Fatalf("the sync object does not point an OCIRepository at deploy/:\n%s", sync)
	}

	code, stdout, _ = scribe(t, append(args, "--docker-config", good)...)
	if code != exitOK || !strings.HasSuffix(stdout, "v1@"+m[2]+" (unchanged)\n") {
		t.Fatalf("second publish: exit %d, %q, want unchanged at %s", code, stdout, m[2])
	}
}

func TestPublishToDirectoryWritesTheTreeUnderPath(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "repo")
	code, stdout, stderr := scribe(t, "publish", "-f", canary, "-o", repo, "--path", "deploy")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	dir := filepath.Join(repo, "deploy")
	if stdout != "published 1 object to "+dir+"\n" {
		t.Fatalf("report %q does not name %s", stdout, dir)
	}
	tree := readTree(t, dir)
	for _, p := range []string{"shop/workload/checkout/httproute-checkout.yaml", "shop/workload/checkout/kustomization.yaml", "shop/workload/checkout.sync.yaml"} {
		if len(tree[p]) == 0 {
			t.Errorf("%s is missing from %s", p, dir)
		}
	}
	// diff with the same --path agrees: the layout is the repository's.
	if code, stdout, stderr := scribe(t, "diff", "-f", canary, "-d", repo, "--path", "deploy"); code != exitOK {
		t.Fatalf("diff after publish -o: exit %d\n%s%s", code, stdout, stderr)
	}
}

// A --message-template that would loop, write without end or forge
// Scribe's trailers is exit 2 naming the flag, and nothing is pushed: an
// unbounded shape before rendering, a bound hit when the message is made.
func TestPublishMessageTemplateIsBoundedAndCannotForgeTrailers(t *testing.T) {
	clearGitEnv(t)
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	before := branchHead(t, srv, "exp", "main")
	for _, tc := range []struct{ name, tmpl, want string }{
		{"range over a number", "{{range 100000000}}x{{end}}", "range over 100000000"},
		{"recursive template", `{{define "a"}}{{template "a" .}}{{end}}{{template "a" .}}`, "cannot invoke templates"},
		{"output beyond the bound", `{{range .Changes}}{{range $.Changes}}{{printf "%060000d" 0}}{{end}}{{end}}`, "exceeds its bounds"},
		{"a forged trailer", "ci: publish\n\nScribe-Object: Workload/prod/db", "trailers are Scribe's own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, _, stderr := scribe(t, "publish", "-f", filepath.Join(fixtures, "valid"), "--git", url, "--cache-dir", t.TempDir(), "--stage", "1", "--message-template", tc.tmpl)
			if code != exitError || !strings.Contains(stderr, "--message-template") || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want 2 naming --message-template with %q:\n%s", code, tc.want, stderr)
			}
			if d := time.Since(start); d > time.Minute {
				t.Errorf("took %s", d)
			}
			if head := branchHead(t, srv, "exp", "main"); head != before {
				t.Errorf("the branch moved to %s", head)
			}
		})
	}
}

// TestPublishKeepsTheSyncNameAnEarlierReleaseGave: a custom resource whose
// Kustomization carries the name an earlier release gave it
// (<kind>-<namespace>-<name>) keeps it when published again, to Git and
// to a directory, so upgrading renames no working applier object; a sync
// file holding another name is replaced by the one-to-one name, and
// publish says so on stderr.
func TestPublishKeepsTheSyncNameAnEarlierReleaseGave(t *testing.T) {
	clearGitEnv(t)
	const syncPath = "deploy/shop/workload/checkout.sync.yaml"
	for _, tc := range []struct {
		name, old, want string
		note            bool
	}{
		{"the earlier release's name is kept", "workload-shop-checkout", "workload-shop-checkout", false},
		{"another name is replaced, saying so", "workload-shop-cart", "workload.shop.checkout", true},
	} {
		// rename rewrites the sync file's Kustomization name as old.
		rename := func(t *testing.T, file string) {
			t.Helper()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte("name: workload.shop.checkout\n")) {
				t.Fatalf("%s does not name workload.shop.checkout:\n%s", file, data)
			}
			if err := os.WriteFile(file, bytes.ReplaceAll(data, []byte("name: workload.shop.checkout\n"), []byte("name: "+tc.old+"\n")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		check := func(t *testing.T, file, stderr string) {
			t.Helper()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte("  name: "+tc.want+"\n")) {
				t.Errorf("sync file after the second publish does not name %s:\n%s", tc.want, data)
			}
			if got := strings.Contains(stderr, "note: "+syncPath+": Kustomization "+tc.old+" becomes "+tc.want); got != tc.note {
				t.Errorf("stderr says the rename: %v, want %v:\n%s", got, tc.note, stderr)
			}
		}
		t.Run(tc.name+", git", func(t *testing.T) {
			srv := publishtest.NewGitServer(t)
			url := srv.InitRepo(t, "exp", "main")
			args := []string{"publish", "-f", canary, "--git", url, "--path", "deploy", "--cache-dir", t.TempDir()}
			if code, _, stderr := scribe(t, args...); code != exitOK {
				t.Fatalf("publish: exit %d: %s", code, stderr)
			}
			work := t.TempDir()
			publishtest.Git(t, "", "clone", "--quiet", "--branch", "main", url, work)
			rename(t, filepath.Join(work, syncPath))
			publishtest.Git(t, work, "-c", "user.name=Earlier", "-c", "user.email=e@example.com", "commit", "--quiet", "-am", "as an earlier release named it")
			publishtest.Git(t, work, "push", "--quiet", "origin", "main")
			code, _, stderr := scribe(t, args...)
			if code != exitOK {
				t.Fatalf("second publish: exit %d: %s", code, stderr)
			}
			publishtest.Git(t, work, "pull", "--quiet", "origin", "main")
			check(t, filepath.Join(work, syncPath), stderr)
		})
		t.Run(tc.name+", directory", func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "repo")
			args := []string{"publish", "-f", canary, "-o", out, "--path", "deploy"}
			if code, _, stderr := scribe(t, args...); code != exitOK {
				t.Fatalf("publish: exit %d: %s", code, stderr)
			}
			rename(t, filepath.Join(out, syncPath))
			code, _, stderr := scribe(t, args...)
			if code != exitOK {
				t.Fatalf("second publish: exit %d: %s", code, stderr)
			}
			check(t, filepath.Join(out, syncPath), stderr)
		})
	}
}
