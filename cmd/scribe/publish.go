package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/spf13/cobra"

	"github.com/scribe-gitops/scribe/internal/credurl"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/ocisink"
)

// exitPublishFailed is scribe publish's exit code when the target refused
// or could not be reached: the input was fine, the publish was not.
const exitPublishFailed = 1

// Environment variables with Git credentials; they override the files of
// --secret-dir with the same meaning.
const (
	envGitUsername = "SCRIBE_GIT_USERNAME"
	envGitPassword = "SCRIBE_GIT_PASSWORD"
	envGitToken    = "SCRIBE_GIT_TOKEN"
)

// maxSecretFile bounds one credentials file (a Secret holds at most
// 1 MiB in all).
const maxSecretFile = 1 << 20

// dockerConfigKey is the key of a kubernetes.io/dockerconfigjson Secret.
const dockerConfigKey = ".dockerconfigjson"

// publishFlags are the flags of scribe publish beyond the render flags.
type publishFlags struct {
	git             string
	branch          string
	oci             string
	out             string
	secretDir       string
	dockerConfig    string
	authorName      string
	authorEmail     string
	messageTemplate string
	insecure        bool
	cacheDir        string
}

func (p *publishFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&p.git, "git", "", "publish to this Git repository (https://, http://, ssh://, scp form, or a local path or file://); other schemes are refused")
	fl.StringVar(&p.branch, "branch", "main", "with --git: branch that receives the commit (with --applier ArgoCD it is also --revision); a valid Git branch name, refs/heads/NAME is taken as NAME")
	fl.StringVar(&p.oci, "oci", "", "publish to this OCI artifact, oci://HOST/REPO[:TAG] (tag latest if omitted)")
	registerOutput(fl, &p.out, "DIR/<path>")
	fl.StringVar(&p.secretDir, "secret-dir", "", "directory laid out as a mounted Secret: username, password, bearerToken, identity, known_hosts (Git) or .dockerconfigjson (OCI)")
	fl.StringVar(&p.dockerConfig, "docker-config", "", "with --oci: Docker config JSON file with the registry's credentials")
	fl.StringVar(&p.authorName, "author-name", "", "with --git: commit author name (default Scribe)")
	fl.StringVar(&p.authorEmail, "author-email", "", "with --git: commit author email (default scribe@scribe.dev)")
	fl.StringVar(&p.messageTemplate, "message-template", "", "with --git: Go template of the commit subject and body; Scribe appends its trailers")
	fl.BoolVar(&p.insecure, "insecure", false, "with --oci: allow plain HTTP to the registry")
	fl.StringVar(&p.cacheDir, "cache-dir", "", "with --git: cache of fetched repositories (default ${XDG_CACHE_HOME:-$HOME/.cache}/scribe/git)")
}

func newPublishCmd() *cobra.Command {
	var f renderFlags
	var p publishFlags
	cmd := &cobra.Command{
		Use:   "publish -f FILE|DIR|- (--git URL [--branch B] | --oci oci://HOST/REPO[:TAG] | -o DIR) [--path P]",
		Short: "Render custom resources and publish them to Git, an OCI registry or a directory",
		Long: `Publish renders every custom resource exactly as scribe render does and
publishes all of them at once: one commit on --branch of --git, one artifact
pushed to --oci, or one atomic write of -o DIR/<path>. If any custom resource
fails to render, nothing is published. --path is both the directory the
bundles are written under and the path the sync objects point at.

An Experiment is published one commit stage at a time, as the controller
commits it: --stage 1 (its clusters), then 2 (components), 3 (workflow
templates) and 4 (workflow runs), each once the applier has applied the
one before. Without --stage an Experiment is refused, and a stage is
refused unless the target holds the stage before it (or that stage), so
a Workflow never lands with the clusters it runs on.

Credentials (never needed for -o): --secret-dir DIR with the files of a
mounted Secret (Git: username and password, or bearerToken, or identity and
known_hosts; OCI: .dockerconfigjson), the variables SCRIBE_GIT_USERNAME,
SCRIBE_GIT_PASSWORD and SCRIBE_GIT_TOKEN (bearer), which override those
files, and --docker-config FILE for OCI.

On success one line goes to stdout:
  published N objects to URL REVISION (changed|unchanged)
  published N objects to DIR
Exit code 0: published (changed or unchanged); 1: the target failed or
refused what it already holds (the error's reason is on stderr, such as
AuthenticationFailed, ObjectConflict for an object another custom resource
already publishes there, SyncIndexConflict for a kustomization.yaml at
--path that Scribe did not write, CacheCorrupt); 2: bad input.`,
		Example: `  # Commit to a branch of a Git repository, with a token from the environment
  SCRIBE_GIT_TOKEN=... scribe publish -f deploy/ --git https://git.example.com/org/fleet.git --branch main --path clusters/dev

  # Push an OCI artifact that Flux's OCIRepository pulls
  scribe publish -f deploy/ --oci oci://ghcr.io/org/fleet:dev --docker-config ~/.docker/config.json --source-kind OCIRepository

  # Write into a local checkout, under its clusters/dev
  scribe publish -f deploy/ -o fleet --path clusters/dev

  # An Experiment, stage by stage (wait for the applier between them)
  scribe publish -f experiments/tutorial.yaml --git https://git.example.com/org/experiments.git --stage 1
  scribe publish -f experiments/tutorial.yaml --git https://git.example.com/org/experiments.git --stage 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPublish(cmd, &f, &p)
		},
	}
	f.register(cmd)
	p.register(cmd)
	return cmd
}

// publishTarget is where publish writes: a sink, or a local directory.
type publishTarget struct {
	sink publish.Sink
	// git and gitOpts, for --git: to read the branch's sync files.
	git     *gitsink.Git
	gitOpts gitsink.Options
	where   string // URL or directory, for the report line
	dir     string // -o: the directory WriteDir replaces
	oci     bool
}

func runPublish(cmd *cobra.Command, f *renderFlags, p *publishFlags) error {
	bad := func(err error) error { return &codeError{code: exitError, err: err} }
	if err := p.check(cmd, f); err != nil {
		return bad(err)
	}
	target, err := p.target(f.path, os.Getenv)
	if err != nil {
		return bad(err)
	}
	if target.dir != "" {
		if err := checkOutput(target.dir, f.files); err != nil {
			return bad(err)
		}
	}
	bundles, err := f.renderAll(cmd.Context())
	if err != nil {
		return bad(err)
	}
	// The naming migration: a custom resource whose applier object has
	// the name an earlier release gave it keeps that name (rendered again
	// knowing it); any other rename is said, not done silently.
	names, err := p.existingSyncNames(cmd.Context(), target, f.path)
	if err != nil {
		return publishFailure(err, target.oci)
	}
	if len(names.renames(bundles)) > 0 {
		f.syncNames = names.bySource(bundles)
		if bundles, err = f.renderAll(cmd.Context()); err != nil {
			return bad(err)
		}
		for _, r := range names.renames(bundles) {
			if _, err := fmt.Fprintf(cmd.ErrOrStderr(), "note: %s (the applier deletes what the old one applied, and the new one applies it again)\n", r); err != nil {
				return err
			}
		}
	}
	if err := p.checkStages(cmd.Context(), target, f, bundles); err != nil {
		return bad(err)
	}
	objects := fmt.Sprintf("%d object", len(bundles))
	if len(bundles) != 1 {
		objects += "s"
	}
	w := cmd.OutOrStdout()
	if target.sink == nil {
		if err := publish.WriteOutputDir(cmd.Context(), target.dir, bundles); err != nil {
			var notOwned *publish.NotOwnedError
			if errors.As(err, &notOwned) {
				return bad(err)
			}
			return &codeError{code: exitPublishFailed, err: fmt.Errorf("publish to %s: %w", target.dir, err)}
		}
		return writeReport(w, "published %s to %s\n", objects, target.where)
	}
	changes := make([]publish.Change, 0, len(bundles))
	for _, b := range bundles {
		changes = append(changes, publish.ChangeFor(b))
	}
	res, err := target.sink.Publish(cmd.Context(), changes...)
	if err != nil {
		return publishFailure(err, target.oci)
	}
	state := "unchanged"
	if res.Changed {
		state = "changed"
	}
	return writeReport(w, "published %s to %s %s (%s)\n", objects, target.where, res.Revision, state)
}

func writeReport(w io.Writer, format string, args ...any) error {
	if _, err := fmt.Fprintf(w, format, args...); err != nil {
		return &codeError{code: exitError, err: fmt.Errorf("write stdout: %w", err)}
	}
	return nil
}

// check validates the combination of flags and makes the render flags agree
// with the target: a clean --path, the Flux source kind of the target and,
// for Argo CD, the branch it tracks.
func (p *publishFlags) check(cmd *cobra.Command, f *renderFlags) error {
	changed := cmd.Flags().Changed
	n := 0
	for _, set := range []bool{changed("git"), changed("oci"), changed("output")} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("exactly one of --git, --oci or -o/--output is required")
	}
	for _, fl := range []struct {
		name, target string
		ok           bool
	}{
		{"branch", "--git", p.git != ""},
		{"author-name", "--git", p.git != ""},
		{"author-email", "--git", p.git != ""},
		{"message-template", "--git", p.git != ""},
		{"cache-dir", "--git", p.git != ""},
		{"insecure", "--oci", p.oci != ""},
		{"docker-config", "--oci", p.oci != ""},
		{"secret-dir", "--git or --oci", p.out == ""},
	} {
		if changed(fl.name) && !fl.ok {
			return fmt.Errorf("--%s applies only to %s", fl.name, fl.target)
		}
	}
	switch {
	case changed("git") && p.git == "":
		return fmt.Errorf("--git: empty URL")
	case changed("oci") && p.oci == "":
		return fmt.Errorf("--oci: empty URL")
	case changed("output") && p.out == "":
		return fmt.Errorf("-o/--output: empty directory")
	case p.git != "" && p.branch == "":
		return fmt.Errorf("--branch: empty branch name")
	}
	if p.git != "" {
		if err := checkGitURL(p.git); err != nil {
			return err
		}
		branch, err := checkBranch(p.branch)
		if err != nil {
			return err
		}
		p.branch = branch
	}
	if (p.authorName == "") != (p.authorEmail == "") {
		return fmt.Errorf("--author-name and --author-email go together: set both or neither")
	}

	clean, err := cleanRepoPath(f.path)
	if err != nil {
		return err
	}
	f.path = clean

	if f.applier == "Flux" {
		switch {
		case p.oci != "" && !changed("source-kind"):
			f.sourceKind = "OCIRepository"
		case p.oci != "" && f.sourceKind != "OCIRepository":
			return fmt.Errorf("--source-kind %s cannot sync an OCI artifact: use OCIRepository with --oci", f.sourceKind)
		case p.git != "" && f.sourceKind != "GitRepository":
			return fmt.Errorf("--source-kind %s cannot sync a Git repository: use GitRepository with --git", f.sourceKind)
		}
	}
	if f.applier == "ArgoCD" && p.git != "" {
		switch {
		case changed("branch") && changed("revision") && p.branch != f.revision:
			return fmt.Errorf("--branch %s and --revision %s differ: Argo CD would track a branch Scribe does not publish to", p.branch, f.revision)
		case changed("revision"):
			// --revision is the branch published to: it must be one too.
			branch, err := checkBranch(f.revision)
			if err != nil {
				return fmt.Errorf("--revision: %w", err)
			}
			p.branch, f.revision = branch, branch
		default:
			f.revision = p.branch
		}
		if f.repoURL == "" {
			f.repoURL = p.git
		}
	}
	return nil
}

// checkGitURL refuses a --git URL of a scheme Scribe cannot push to, and
// one that carries credentials (they would be written into the sync
// objects and shown): they come from --secret-dir and SCRIBE_GIT_* only.
func checkGitURL(raw string) error {
	if err := checkNoCredentials("--git", raw); err != nil {
		return err
	}
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return fmt.Errorf("--git %q: %w", redactURL(raw), err)
	}
	switch ep.Protocol {
	case "https", "http", "ssh", "file":
		return nil
	default:
		return fmt.Errorf("--git %q: unsupported scheme %q: use https://, http://, ssh://, the scp form user@host:path, or a local path", redactURL(raw), ep.Protocol)
	}
}

// checkBranch validates --branch as Git does (git check-ref-format) and
// returns the branch name: refs/heads/NAME is taken as NAME.
func checkBranch(b string) (string, error) {
	name := strings.TrimPrefix(b, "refs/heads/")
	if name == "" || strings.HasPrefix(name, "refs/") || name == "HEAD" || strings.HasPrefix(name, "-") {
		return "", fmt.Errorf("--branch %q is not a valid branch name", b)
	}
	if err := plumbing.NewBranchReferenceName(name).Validate(); err != nil {
		return "", fmt.Errorf("--branch %q is not a valid branch name: %w", b, err)
	}
	return name, nil
}

// cleanRepoPath cleans --path by the rule every command and the
// controller share (publish.CleanRepoPath).
func cleanRepoPath(p string) (string, error) {
	c, err := publish.CleanRepoPath(p)
	if err != nil {
		return "", fmt.Errorf("--path %w", err)
	}
	return c, nil
}

// target builds the sink for the flags. It reads credentials but does no
// network I/O, so every configuration error shows before rendering.
func (p *publishFlags) target(repoPath string, getenv func(string) string) (publishTarget, error) {
	sinkPath := repoPath
	if sinkPath == "." {
		sinkPath = ""
	}
	switch {
	case p.out != "":
		dir := filepath.Join(p.out, filepath.FromSlash(repoPath))
		return publishTarget{where: dir, dir: dir}, nil
	case p.oci != "":
		if err := checkNoCredentials("--oci", p.oci); err != nil {
			return publishTarget{}, err
		}
		cfg, err := p.dockerConfigJSON()
		if err != nil {
			return publishTarget{}, err
		}
		s, err := ocisink.New(ocisink.Options{URL: p.oci, Path: sinkPath, Insecure: p.insecure, DockerConfigJSON: cfg})
		if err != nil {
			return publishTarget{}, fmt.Errorf("--oci: %w", err)
		}
		return publishTarget{sink: s, where: s.URL(), oci: true}, nil
	default:
		data, err := p.gitSecret(getenv)
		if err != nil {
			return publishTarget{}, err
		}
		auth, err := gitsink.AuthFromSecret(p.git, data)
		if err != nil {
			return publishTarget{}, fmt.Errorf("%w (credentials come from --secret-dir and %s, %s, %s)", err, envGitUsername, envGitPassword, envGitToken)
		}
		cacheDir := p.cacheDir
		if cacheDir == "" {
			if cacheDir, err = defaultGitCacheDir(getenv); err != nil {
				return publishTarget{}, err
			}
		}
		opts := gitsink.Options{URL: p.git, Branch: p.branch, Path: sinkPath, Auth: auth, MessageTemplate: p.messageTemplate, MessageTemplateName: "--message-template", SyncIndex: true}
		if p.authorName != "" {
			opts.Author = gitsink.Signature{Name: p.authorName, Email: p.authorEmail}
		}
		g := gitsink.New(cacheDir)
		s, err := g.Sink(opts)
		if err != nil {
			return publishTarget{}, fmt.Errorf("--git: %w", err)
		}
		return publishTarget{sink: s, where: redactURL(p.git), git: g, gitOpts: opts}, nil
	}
}

// gitSecret collects the Git credentials: the Secret files of --secret-dir,
// overridden by the SCRIBE_GIT_* variables.
func (p *publishFlags) gitSecret(getenv func(string) string) (map[string][]byte, error) {
	data := map[string][]byte{}
	if p.secretDir != "" {
		keys := []string{gitsink.SecretUsername, gitsink.SecretPassword, gitsink.SecretBearerToken, gitsink.SecretIdentity, gitsink.SecretKnownHosts}
		if err := readSecretDir(p.secretDir, keys, data); err != nil {
			return nil, err
		}
		if len(data) == 0 {
			return nil, fmt.Errorf("--secret-dir %s holds none of the Git credential files %s", p.secretDir, strings.Join(keys, ", "))
		}
	}
	for env, key := range map[string]string{envGitUsername: gitsink.SecretUsername, envGitPassword: gitsink.SecretPassword, envGitToken: gitsink.SecretBearerToken} {
		if v := getenv(env); v != "" {
			data[key] = []byte(v)
		}
	}
	return data, nil
}

// dockerConfigJSON reads the registry credentials of --docker-config or of
// --secret-dir's .dockerconfigjson.
func (p *publishFlags) dockerConfigJSON() ([]byte, error) {
	if p.dockerConfig != "" && p.secretDir != "" {
		return nil, fmt.Errorf("--docker-config and --secret-dir both give registry credentials: use one")
	}
	if p.dockerConfig != "" {
		data, err := publish.ReadRegular(nil, p.dockerConfig, maxSecretFile)
		if err != nil {
			return nil, fmt.Errorf("--docker-config: %w", err)
		}
		return data, nil
	}
	if p.secretDir == "" {
		return nil, nil
	}
	data := map[string][]byte{}
	if err := readSecretDir(p.secretDir, []string{dockerConfigKey}, data); err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("--secret-dir %s has no %s file", p.secretDir, dockerConfigKey)
	}
	return data[dockerConfigKey], nil
}

// readSecretDir reads the files named keys that exist in dir into data.
func readSecretDir(dir string, keys []string, data map[string][]byte) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("--secret-dir: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("--secret-dir: %s is not a directory", dir)
	}
	for _, k := range keys {
		v, err := publish.ReadRegular(nil, filepath.Join(dir, k), maxSecretFile)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("--secret-dir: %w", err)
		}
		data[k] = v
	}
	return nil
}

// defaultGitCacheDir is ${XDG_CACHE_HOME:-$HOME/.cache}/scribe/git.
func defaultGitCacheDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CACHE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "scribe", "git"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("--cache-dir: no default without $HOME or $XDG_CACHE_HOME: %w", err)
	}
	return filepath.Join(home, ".cache", "scribe", "git"), nil
}

// redactURL drops the credentials of a URL (see credurl.Redact).
func redactURL(raw string) string { return credurl.Redact(raw) }

// checkNoCredentials refuses the URL of flag when it carries credentials,
// naming the flag and where credentials come from, never echoing them.
func checkNoCredentials(flag, raw string) error {
	if err := credurl.Check(raw); err != nil {
		return fmt.Errorf("%s: %w: Scribe would write it into the sync objects; give Git credentials with --secret-dir or %s/%s (or %s), registry credentials with --docker-config",
			flag, err, envGitUsername, envGitPassword, envGitToken)
	}
	return nil
}

// publishFailure turns an error of Sink.Publish into the CLI's error: its
// reason first, then the message, then where credentials come from when
// they were the problem. A change the sink finds invalid (such as a
// commit message template that fails) is bad input, exit 2; anything
// else is a failed publish, exit 1.
func publishFailure(err error, oci bool) error {
	reason := publish.ReasonOf(err)
	switch {
	case errors.Is(err, ocisink.ErrUnauthorized):
		reason = publish.ReasonAuthentication
	case errors.Is(err, ocisink.ErrUnreachable):
		reason = publish.ReasonUnreachable
	case errors.Is(err, ocisink.ErrInvalidURL):
		reason = publish.ReasonInvalid
	}
	msg := fmt.Errorf("%s: %w", reason, err)
	if reason == publish.ReasonAuthentication {
		from := fmt.Sprintf("--secret-dir, %s/%s or %s", envGitUsername, envGitPassword, envGitToken)
		if oci {
			from = "--docker-config or " + dockerConfigKey + " in --secret-dir"
		}
		msg = fmt.Errorf("%w\nauthentication failed: check the credentials given by %s", msg, from)
	}
	code := exitPublishFailed
	if reason == publish.ReasonInvalid {
		code = exitError
	}
	return &codeError{code: code, err: msg}
}
