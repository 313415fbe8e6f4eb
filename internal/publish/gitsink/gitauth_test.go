package gitsink_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

func TestGitAuthFromSecretData(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	ssh := publishtest.NewSSHServer(t, srv)
	key := ssh.NewClientKey(t)
	for _, tc := range []struct {
		name, url string
		data      map[string][]byte
		wantType  string // "" for anonymous
		wantErr   string
	}{
		{name: "anonymous https", url: "https://example.com/x.git"},
		{name: "basic", url: "https://example.com/x.git", data: map[string][]byte{"username": []byte("u"), "password": []byte("p\n")}, wantType: "http-basic-auth"},
		{name: "token as password", url: "https://example.com/x.git", data: map[string][]byte{"password": []byte("tok")}, wantType: "http-basic-auth"},
		{name: "bearer", url: "https://example.com/x.git", data: map[string][]byte{"bearerToken": []byte("tok")}, wantType: "http-token-auth"},
		{name: "username without password", url: "https://example.com/x.git", data: map[string][]byte{"username": []byte("u")}, wantErr: `"username" is set but "password" is empty`},
		{name: "bearer and basic", url: "https://example.com/x.git", data: map[string][]byte{"username": []byte("u"), "bearerToken": []byte("t")}, wantErr: "not both"},
		{name: "ssh key on https", url: "https://example.com/x.git", data: map[string][]byte{"identity": key}, wantErr: `"identity" is an SSH key, but the URL is https`},
		{name: "ssh", url: ssh.RepoURL("x"), data: map[string][]byte{"identity": key, "known_hosts": ssh.KnownHosts()}, wantType: "ssh-public-keys"},
		{name: "ssh scp form", url: "git@example.com:org/x.git", data: map[string][]byte{"identity": key, "known_hosts": ssh.KnownHosts()}, wantType: "ssh-public-keys"},
		{name: "ssh without known_hosts", url: ssh.RepoURL("x"), data: map[string][]byte{"identity": key}, wantErr: "never skips the host key check"},
		{name: "ssh without key", url: ssh.RepoURL("x"), data: map[string][]byte{"known_hosts": ssh.KnownHosts()}, wantErr: `needs "identity"`},
		{name: "ssh bad key", url: ssh.RepoURL("x"), data: map[string][]byte{"identity": []byte("not a key"), "known_hosts": ssh.KnownHosts()}, wantErr: `"identity"`},
		{name: "ssh bad known_hosts", url: ssh.RepoURL("x"), data: map[string][]byte{"identity": key, "known_hosts": []byte("garbage")}, wantErr: `"known_hosts"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth, err := gitsink.AuthFromSecret(tc.url, tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if auth != nil {
				got = auth.Name()
			}
			if got != tc.wantType {
				t.Fatalf("auth = %q, want %q", got, tc.wantType)
			}
		})
	}
}

// publishOnce publishes one small bundle through a fresh sink.
func publishOnce(t *testing.T, g *gitsink.Git, opts gitsink.Options, name string) (publish.Result, error) {
	t.Helper()
	sink, err := g.Sink(opts)
	if err != nil {
		t.Fatal(err)
	}
	return sink.Publish(context.Background(), publish.ChangeFor(testBundle("ns", name, name)))
}

func TestGitPublishFailuresSayWhichAndTheCacheStaysUsable(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "exp", "main")
	sshSrv := publishtest.NewSSHServer(t, srv)
	key := sshSrv.NewClientKey(t)
	other := publishtest.NewSSHServer(t, srv) // same repos, another host key

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + closed.Addr().String() + "/exp.git"
	_ = closed.Close()

	basic := func(u, p string) map[string][]byte {
		return map[string][]byte{"username": []byte(u), "password": []byte(p)}
	}
	for _, tc := range []struct {
		name       string
		setup      func()
		url        string
		secret     map[string][]byte
		wantReason publish.Reason
		wantMsg    string
	}{
		{name: "unreachable remote", url: deadURL, wantReason: publish.ReasonUnreachable, wantMsg: "the remote did not answer"},
		{name: "missing repository", url: srv.RepoURL("nope"), wantReason: publish.ReasonNotFound, wantMsg: "repository not found"},
		{name: "credentials required", setup: func() { srv.RequireBasicAuth("scribe", "s3cret") }, url: url,
			wantReason: publish.ReasonAuthentication, wantMsg: "the remote wants credentials"},
		{name: "wrong password", setup: func() { srv.RequireBasicAuth("scribe", "s3cret") }, url: url, secret: basic("scribe", "wrong"),
			wantReason: publish.ReasonAuthentication, wantMsg: "refused the credentials"},
		{name: "wrong bearer token", setup: func() { srv.RequireBearerToken("t0ken") }, url: url, secret: map[string][]byte{"bearerToken": []byte("wrong")},
			wantReason: publish.ReasonAuthentication, wantMsg: "credentials"},
		{name: "host key mismatch", url: sshSrv.RepoURL("exp"),
			secret:     map[string][]byte{"identity": key, "known_hosts": []byte(strings.Replace(string(other.KnownHosts()), other.Addr[strings.LastIndex(other.Addr, ":")+1:], sshSrv.Addr[strings.LastIndex(sshSrv.Addr, ":")+1:], 1))},
			wantReason: publish.ReasonHostKey, wantMsg: "host key mismatch"},
		{name: "host key unknown", url: sshSrv.RepoURL("exp"), secret: map[string][]byte{"identity": key, "known_hosts": other.KnownHosts()},
			wantReason: publish.ReasonHostKey, wantMsg: "not in known_hosts"},
		{name: "ssh key not authorized", url: sshSrv.RepoURL("exp"),
			secret:     map[string][]byte{"identity": publishtest.NewSSHServer(t, srv).NewClientKey(t), "known_hosts": sshSrv.KnownHosts()},
			wantReason: publish.ReasonAuthentication, wantMsg: "unable to authenticate"},
		{name: "protected branch", setup: func() { srv.Protect(t, "exp", "main") }, url: url,
			wantReason: publish.ReasonRejected, wantMsg: "GH006: Protected branch update failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.RequireBasicAuth("", "")
			if tc.setup != nil {
				tc.setup()
			}
			auth, err := gitsink.AuthFromSecret(tc.url, tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			g := gitsink.New(t.TempDir())
			opts := gitsink.Options{URL: tc.url, Branch: "main", Auth: auth, MaxAttempts: 2}
			_, err = publishOnce(t, g, opts, "fails")
			if err == nil {
				t.Fatal("publish succeeded")
			}
			if got := publish.ReasonOf(err); got != tc.wantReason {
				t.Errorf("reason = %s, want %s (%v)", got, tc.wantReason, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantMsg)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "t0ken") {
				t.Errorf("error leaks a credential: %v", err)
			}
		})
	}

	// After all of that, a correct publish through a cache that saw the
	// failures works: nothing half-written was kept.
	t.Run("recovers", func(t *testing.T) {
		publishtest.Git(t, "", "--git-dir", srv.BareDir("exp"), "config", "core.hooksPath", "/dev/null")
		srv.RequireBasicAuth("scribe", "s3cret")
		cache := t.TempDir()
		g := gitsink.New(cache)
		bad, _ := gitsink.AuthFromSecret(url, basic("scribe", "wrong"))
		if _, err := publishOnce(t, g, gitsink.Options{URL: url, Branch: "main", Auth: bad}, "x"); err == nil {
			t.Fatal("wrong password accepted")
		}
		good, _ := gitsink.AuthFromSecret(url, basic("scribe", "s3cret"))
		res, err := publishOnce(t, g, gitsink.Options{URL: url, Branch: "main", Auth: good}, "x")
		if err != nil || !res.Changed {
			t.Fatalf("publish after a failure = %+v, %v", res, err)
		}
		sshAuth, _ := gitsink.AuthFromSecret(sshSrv.RepoURL("exp"), map[string][]byte{"identity": key, "known_hosts": sshSrv.KnownHosts()})
		res2, err := publishOnce(t, g, gitsink.Options{URL: sshSrv.RepoURL("exp"), Branch: "main", Auth: sshAuth}, "over-ssh")
		if err != nil || !res2.Changed {
			t.Fatalf("publish over ssh = %+v, %v", res2, err)
		}
		publishtest.Git(t, "", "--git-dir", srv.BareDir("exp"), "fsck", "--strict", "--no-progress")
	})
}
