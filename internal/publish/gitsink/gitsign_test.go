package gitsink_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"golang.org/x/crypto/ssh"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// gpgKey makes an OpenPGP key pair: the armored private key and the
// armored public key.
func gpgKey(t *testing.T) (priv, pub []byte) {
	t.Helper()
	e, err := openpgp.NewEntity("Scribe Bot", "", "bot@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	var pb, kb bytes.Buffer
	w, _ := armor.Encode(&pb, openpgp.PrivateKeyType, nil)
	if err := e.SerializePrivate(w, nil); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	w, _ = armor.Encode(&kb, openpgp.PublicKeyType, nil)
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	return pb.Bytes(), kb.Bytes()
}

// verifyCommit runs `git verify-commit` with env and config args, returning
// git's combined output.
func verifyCommit(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", append(args, "verify-commit", "-v", "HEAD")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append(env, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestGitPublishSignsCommitsThatGitVerifies(t *testing.T) {
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "signed", "main")

	gpgPriv, gpgPub := gpgKey(t)
	_, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(edPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	sshPriv := pem.EncodeToMemory(block)
	sshSigner, _ := ssh.NewSignerFromKey(edPriv)
	allowed := filepath.Join(t.TempDir(), "allowed_signers")
	if err := os.WriteFile(allowed, []byte("bot@example.com "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshSigner.PublicKey())))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gnupg := t.TempDir()
	_, noGPG := exec.LookPath("gpg")
	if noGPG == nil {
		imp := exec.Command("gpg", "--batch", "--import")
		imp.Env = append(os.Environ(), "GNUPGHOME="+gnupg)
		imp.Stdin = bytes.NewReader(gpgPub)
		if out, err := imp.CombinedOutput(); err != nil {
			t.Fatalf("gpg --import: %v\n%s", err, out)
		}
	}

	for _, tc := range []struct {
		name   string
		format string
		secret map[string][]byte
		env    []string
		args   []string
		want   string
	}{
		{name: "gpg", format: "gpg", secret: map[string][]byte{"git.asc": gpgPriv}, env: []string{"GNUPGHOME=" + gnupg}, want: `Good signature from "Scribe Bot <bot@example.com>"`},
		{name: "ssh", format: "ssh", secret: map[string][]byte{"identity": sshPriv}, args: []string{"-c", "gpg.ssh.allowedSignersFile=" + allowed}, want: `Good "git" signature for bot@example.com`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.format == "gpg" && noGPG != nil {
				t.Skip("gpg is not installed: git cannot verify OpenPGP signatures here")
			}
			if _, err := exec.LookPath("ssh-keygen"); tc.format == "ssh" && err != nil {
				t.Skip("ssh-keygen is not installed: git cannot verify SSH signatures here")
			}
			signer, err := gitsink.SignerFromSecret(tc.format, tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			g := gitsink.New(t.TempDir())
			sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main", Signer: signer, Author: gitsink.Signature{Name: "Scribe Bot", Email: "bot@example.com"}})
			if _, err := sink.Publish(context.Background(), publish.ChangeFor(testBundle("ns", "signed-"+tc.name, "x"))); err != nil {
				t.Fatal(err)
			}
			work := clone(t, url, "main")
			out, err := verifyCommit(t, work, tc.env, tc.args...)
			if err != nil || !strings.Contains(out, tc.want) {
				t.Fatalf("git verify-commit: %v\n%s", err, out)
			}
		})
	}
}

func TestSignerFromSecretRejectsBadKeys(t *testing.T) {
	gpgPriv, gpgPub := gpgKey(t)
	for _, tc := range []struct {
		name, format string
		data         map[string][]byte
		want         string
	}{
		{name: "unknown format", format: "x509", data: map[string][]byte{"git.asc": gpgPriv}, want: `format "x509" is not gpg or ssh`},
		{name: "gpg without key", format: "gpg", data: map[string][]byte{"identity": []byte("x")}, want: `needs "git.asc"`},
		{name: "gpg public key only", format: "gpg", data: map[string][]byte{"git.asc": gpgPub}, want: "no OpenPGP private key"},
		{name: "gpg garbage", format: "gpg", data: map[string][]byte{"git.asc": []byte("garbage")}, want: "signing key"},
		{name: "ssh garbage", format: "ssh", data: map[string][]byte{"identity": []byte("garbage")}, want: "signing key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gitsink.SignerFromSecret(tc.format, tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
