// Package ocisink publishes rendered bundles as a Flux OCI artifact: one
// artifact per tag holds the whole rendered tree of a repository path, and
// every Publish replaces the paths its changes own, as the Git sink does
// for a branch. Flux's OCIRepository consumes the artifact.
package ocisink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/scribe-gitops/scribe/internal/credurl"
	"github.com/scribe-gitops/scribe/internal/publish"
)

// Errors that classify what went wrong; test for them with errors.Is.
var (
	// ErrInvalidURL marks a malformed artifact URL or repository path.
	ErrInvalidURL = errors.New("invalid OCI URL")
	// ErrUnreachable marks a registry that could not be connected to.
	ErrUnreachable = errors.New("registry unreachable")
	// ErrUnauthorized marks credentials the registry rejected (HTTP 401 or
	// 403), or their absence where the registry requires them.
	ErrUnauthorized = errors.New("unauthorized")
)

// Options configure a Sink.
type Options struct {
	// URL of the artifact, oci://host[:port]/repository[:tag], the tag
	// "latest" when omitted.
	URL string
	// Path is the repository path inside the artifact that bundles are
	// written under; empty for the artifact root.
	Path string
	// Insecure lets the sink talk plain HTTP to the registry (after trying
	// HTTPS). go-containerregistry already does so for localhost, loopback
	// and private addresses.
	Insecure bool
	// DockerConfigJSON is the .dockerconfigjson key of a
	// kubernetes.io/dockerconfigjson Secret. The entry for the URL's
	// registry authenticates; without one the sink is anonymous.
	DockerConfigJSON []byte
	// Created is the org.opencontainers.image.created annotation; the zero
	// time is written as the Unix epoch so that equal content gives an
	// equal digest.
	Created time.Time
	// Revision is the org.opencontainers.image.revision annotation; empty
	// means "sha256:<hex>" of the artifact's tar content.
	Revision string
	// Source is the org.opencontainers.image.source annotation; empty means
	// URL.
	Source string
	// Transport for registry requests; nil means remote.DefaultTransport.
	// Requests are retried on transient failures on top of it.
	Transport http.RoundTripper
	// SyncIndex keeps <Path>/kustomization.yaml listing every object's
	// .sync.yaml, as the Git sink does (publish.SyncIndexFile).
	SyncIndex bool
}

// Sink publishes to one tag of an OCI repository. It is safe for
// concurrent use: Publish calls are serialized.
type Sink struct {
	url    string // canonical oci:// form, for messages
	ref    name.Tag
	prefix string // Options.Path cleaned, "" or ending in "/"
	// syncIndex keeps <Path>/kustomization.yaml listing the sync files.
	syncIndex bool
	opts      Options
	auth      authn.Authenticator
	anon      bool // no credentials for the registry

	mu sync.Mutex
}

var _ publish.Sink = (*Sink)(nil)

// New checks opts and makes a Sink. It does no network I/O.
func New(opts Options) (*Sink, error) {
	ref, err := parseURL(opts.URL, opts.Insecure)
	if err != nil {
		return nil, err
	}
	prefix, err := cleanPrefix(opts.Path)
	if err != nil {
		return nil, err
	}
	auth, err := authenticator(opts.DockerConfigJSON, ref.Context().Registry)
	if err != nil {
		return nil, err
	}
	if opts.Transport == nil {
		opts.Transport = remote.DefaultTransport
	}
	if !opts.Insecure {
		// go-containerregistry falls back to plain HTTP on its own for a
		// registry at a private IP literal or a .local name; without
		// Insecure nothing, credentials least of all, goes in the clear
		// but to loopback.
		opts.Transport = httpsOnly{next: opts.Transport}
	}
	return &Sink{url: "oci://" + ref.String(), ref: ref, prefix: prefix, syncIndex: opts.SyncIndex, opts: opts, auth: auth, anon: auth == authn.Anonymous}, nil
}

// URL is the artifact's canonical oci://host/repository:tag.
func (s *Sink) URL() string { return s.url }

// Publish applies changes to the artifact and pushes it. Each change's
// owned paths are replaced (or, for a delete, removed); every other file of
// the artifact is kept. When the content is unchanged nothing is pushed and
// the current manifest digest is returned with Changed false. A tag that
// does not exist yet is created, even if only deletes leave it empty.
func (s *Sink) Publish(ctx context.Context, changes ...publish.Change) (publish.Result, error) {
	for _, c := range changes {
		if err := c.Validate(); err != nil {
			return publish.Result{}, &publish.Error{Reason: publish.ReasonInvalid, Op: "publish to", URL: s.url, Err: err}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	opts, err := s.session(ctx, transport.PushScope)
	if err != nil {
		return publish.Result{}, s.wrap("push", err)
	}
	cur, files, err := s.pull(opts, "push")
	if err != nil {
		return publish.Result{}, err
	}
	next := maps.Clone(files)
	for _, c := range changes {
		s.apply(next, c)
	}
	if s.syncIndex {
		var syncs []string
		for p := range next {
			rel, ok := strings.CutPrefix(p, s.prefix)
			if ok && strings.HasSuffix(rel, ".sync.yaml") && strings.Count(rel, "/") == 2 {
				syncs = append(syncs, rel)
			}
		}
		sort.Strings(syncs)
		// Never replace an index someone else put into the artifact.
		if prev, ok := files[s.prefix+publish.SyncIndexFile]; ok {
			if err := publish.CheckSyncIndex(prev); err != nil {
				return publish.Result{}, publish.SyncIndexConflict("publish to", s.url, s.prefix+publish.SyncIndexFile, err)
			}
		}
		data, err := publish.SyncIndexData(syncs)
		if err != nil {
			return publish.Result{}, fmt.Errorf("publish to %s: %w", s.url, err)
		}
		next[s.prefix+publish.SyncIndexFile] = data
	}
	if maps.EqualFunc(files, next, bytes.Equal) && (cur != nil || len(changes) == 0) {
		if cur == nil {
			return publish.Result{}, nil
		}
		d, err := cur.Digest()
		if err != nil {
			return publish.Result{}, s.wrap("push", err)
		}
		return s.result(d, false), nil
	}
	return s.write(opts, next)
}

// write builds the artifact of files and pushes it to the tag.
func (s *Sink) write(opts []remote.Option, files map[string][]byte) (publish.Result, error) {
	img, err := s.artifact(files)
	if err != nil {
		return publish.Result{}, fmt.Errorf("build artifact for %s: %w", s.url, err)
	}
	if err := remote.Write(s.ref, img, opts...); err != nil {
		return publish.Result{}, s.wrap("push", err)
	}
	d, err := img.Digest()
	if err != nil {
		return publish.Result{}, fmt.Errorf("build artifact for %s: %w", s.url, err)
	}
	return s.result(d, true), nil
}

// Replace pushes files as the whole artifact, whatever the tag held
// before, without reading it first: for an artifact only Scribe writes,
// whose content is all of one custom resource's directory. Pushing the
// content the tag already holds writes only the manifest again (the
// blobs are found), which keeps its digest. The sync index is not kept.
func (s *Sink) Replace(ctx context.Context, files map[string][]byte) (publish.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	opts, err := s.session(ctx, transport.PushScope)
	if err != nil {
		return publish.Result{}, s.wrap("push", err)
	}
	return s.write(opts, files)
}

// Remove deletes the tag and the manifest it names; a tag that does not
// exist is not an error.
func (s *Sink) Remove(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	opts, err := s.session(ctx, transport.DeleteScope)
	if err != nil {
		return s.wrap("delete", err)
	}
	desc, err := remote.Head(s.ref, opts...)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return s.wrap("delete", err)
	}
	// The tag first, for registries that keep tags apart from the
	// manifests they name (deleting the digest leaves such a tag); then
	// the manifest, which in the others takes its tags with it and is
	// the only delete they accept.
	tagErr := remote.Delete(s.ref, opts...)
	err = remote.Delete(s.ref.Context().Digest(desc.Digest.String()), opts...)
	if err == nil || isNotFound(err) || tagErr == nil {
		return nil
	}
	return s.wrap("delete", err)
}

// Fetch returns the files of the current artifact by their path inside it;
// the map is empty when the tag does not exist yet.
func (s *Sink) Fetch(ctx context.Context) (map[string][]byte, error) {
	opts, err := s.session(ctx, transport.PullScope)
	if err != nil {
		return nil, s.wrap("pull", err)
	}
	_, files, err := s.pull(opts, "pull")
	return files, err
}

// Ping checks that the registry is reachable and accepts the credentials:
// it authenticates for pushing to the repository and reads the tag, which
// need not exist yet. A registry that grants a token narrower than asked
// for shows missing write permission only when Publish pushes.
func (s *Sink) Ping(ctx context.Context) error {
	opts, err := s.session(ctx, transport.PushScope)
	if err == nil {
		_, err = remote.Head(s.ref, opts...)
	}
	if err != nil && !isNotFound(err) {
		return s.wrap("ping", err)
	}
	return nil
}

// apply replaces the paths c owns in files with c's bundle.
func (s *Sink) apply(files map[string][]byte, c publish.Change) {
	dir := s.prefix + publish.OwnedDir(c.Source)
	maps.DeleteFunc(files, func(p string, _ []byte) bool {
		return strings.HasPrefix(p, dir+"/") || p == dir+".sync.yaml"
	})
	if c.Delete {
		return
	}
	for _, f := range c.Bundle.Files {
		files[s.prefix+f.Path] = f.Data
	}
}

// pull fetches the current artifact and its files; a missing tag gives a
// nil image and no files. Errors are labelled with op.
func (s *Sink) pull(opts []remote.Option, op string) (v1.Image, map[string][]byte, error) {
	img, err := remote.Image(s.ref, opts...)
	if isNotFound(err) {
		return nil, map[string][]byte{}, nil
	}
	if err != nil {
		return nil, nil, s.wrap(op, err)
	}
	files, err := readArtifact(img)
	if err != nil {
		return nil, nil, s.wrap(op, fmt.Errorf("read current artifact: %w", err))
	}
	return img, files, nil
}

// session pings the registry and authenticates once for scope (pull, or
// push and pull), so that the requests of one operation share a token.
func (s *Sink) session(ctx context.Context, scope string) ([]remote.Option, error) {
	tr, err := transport.NewWithContext(ctx, s.ref.Context().Registry, s.auth, transport.NewRetry(s.opts.Transport), []string{s.ref.Scope(scope)})
	return []remote.Option{remote.WithContext(ctx), remote.WithTransport(tr)}, err
}

func (s *Sink) result(d v1.Hash, changed bool) publish.Result {
	return publish.Result{Revision: s.ref.TagStr() + "@" + d.String(), Commit: d.String(), Changed: changed, SyncChanged: changed}
}

// wrap adds the operation and URL to err and classifies it.
func (s *Sink) wrap(op string, err error) error {
	var terr *transport.Error
	var nerr *net.OpError
	switch {
	case errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden):
		why := "the registry rejected the credentials"
		if s.anon {
			why = "no credentials for " + s.ref.RegistryStr() + " in the docker config, and the registry requires them"
		}
		return &publish.Error{Reason: publish.ReasonAuthentication, Op: op, URL: s.url, Err: fmt.Errorf("%w: %s: %w", ErrUnauthorized, why, err)}
	case errors.As(err, &nerr):
		return &publish.Error{Reason: publish.ReasonUnreachable, Op: op, URL: s.url, Err: fmt.Errorf("%w: %w", ErrUnreachable, err)}
	}
	return &publish.Error{Reason: publish.ReasonFailed, Op: op, URL: s.url, Err: err}
}

func isNotFound(err error) bool {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return false
	}
	if terr.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range terr.Errors {
		if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
			return true
		}
	}
	return false
}

// parseURL turns oci://host[:port]/repository[:tag] into a tag reference.
func parseURL(raw string, insecure bool) (name.Tag, error) {
	bad := func(format string, args ...any) (name.Tag, error) {
		return name.Tag{}, fmt.Errorf("%w %q: %s", ErrInvalidURL, raw, fmt.Sprintf(format, args...))
	}
	if err := credurl.Check(raw); err != nil {
		// Credentials come from the Docker config only; the URL is shown.
		return name.Tag{}, fmt.Errorf("%w: %w: give registry credentials in a Docker config (.dockerconfigjson)", ErrInvalidURL, err)
	}
	rest, ok := strings.CutPrefix(raw, "oci://")
	if !ok {
		return bad("must start with oci://")
	}
	host, repo, _ := strings.Cut(rest, "/")
	if host == "" {
		return bad("no registry host after oci://")
	}
	if repo == "" {
		return bad("no repository after the registry host %q", host)
	}
	if strings.Contains(repo, "@") {
		return bad("digest references cannot be published to; use a tag")
	}
	tag := "latest"
	if i := strings.LastIndex(repo, ":"); i >= 0 {
		repo, tag = repo[:i], repo[i+1:]
	}
	for _, c := range strings.Split(repo, "/") {
		if c == "" || c == "." || c == ".." {
			return bad("repository %q: empty, . and .. path components are not allowed", repo)
		}
	}
	opts := []name.Option{name.StrictValidation}
	if insecure {
		opts = append(opts, name.Insecure)
	}
	if _, err := name.NewRegistry(host, opts...); err != nil {
		return bad("registry host %q: %v", host, err)
	}
	r, err := name.NewRepository(host+"/"+repo, opts...)
	if err != nil {
		return bad("repository %q: %v", repo, err)
	}
	if _, err := name.NewTag(r.Name()+":"+tag, opts...); err != nil {
		return bad("tag %q: %v", tag, err)
	}
	return r.Tag(tag), nil
}

// cleanPrefix checks the repository path and returns it as "" or "dir/".
func cleanPrefix(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	c, err := publish.CleanRepoPath(p)
	if err != nil {
		return "", fmt.Errorf("invalid path %w", err)
	}
	if c == "." {
		return "", nil
	}
	return c + "/", nil
}

// httpsOnly refuses every request that is not https but to a loopback
// registry: the registry client's own fallback to plain HTTP included.
type httpsOnly struct{ next http.RoundTripper }

func (t httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !loopbackHost(req.URL.Hostname()) {
		return nil, fmt.Errorf("plain HTTP to registry %s refused: only a loopback registry is spoken to without TLS", req.URL.Host)
	}
	return t.next.RoundTrip(req)
}

// loopbackHost says host is exactly localhost or a loopback IP address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}
