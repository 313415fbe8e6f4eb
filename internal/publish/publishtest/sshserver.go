package publishtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHServer serves the repositories of a GitServer over SSH on 127.0.0.1,
// running the real git-upload-pack and git-receive-pack for each session.
type SSHServer struct {
	// Addr is host:port.
	Addr string
	// HostKey is the server's public host key.
	HostKey ssh.PublicKey

	git     *GitServer
	ln      net.Listener
	cfg     *ssh.ServerConfig
	mu      sync.Mutex
	allowed map[string]bool
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
}

// NewSSHServer starts an SSH front for the repositories of gs; it stops
// when the test ends.
func NewSSHServer(t testing.TB, gs *GitServer) *SSHServer {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	s := &SSHServer{git: gs, allowed: map[string]bool{}, conns: map[net.Conn]bool{}, HostKey: hostSigner.PublicKey()}
	s.cfg = &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.allowed[string(key.Marshal())] {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("unknown public key")
		},
	}
	s.cfg.AddHostKey(hostSigner)
	s.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = s.ln.Addr().String()
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		_ = s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// NewClientKey makes an ed25519 key pair, authorizes its public key on the
// server and returns the private key in OpenSSH PEM form.
func (s *SSHServer) NewClientKey(t testing.TB) []byte {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.allowed[string(sshPub.Marshal())] = true
	s.mu.Unlock()
	return pem.EncodeToMemory(block)
}

// KnownHosts is a known_hosts line for this server.
func (s *SSHServer) KnownHosts() []byte {
	return []byte(knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, s.HostKey) + "\n")
}

// RepoURL is the ssh:// clone URL of repository name.
func (s *SSHServer) RepoURL(name string) string {
	return "ssh://git@" + s.Addr + "/" + name + ".git"
}

func (s *SSHServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[conn] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(conn)
			s.mu.Lock()
			delete(s.conns, conn)
			s.mu.Unlock()
		}()
	}
}

func (s *SSHServer) serveConn(conn net.Conn) {
	defer func() { _ = conn.Close() }()
	_, chans, reqs, err := ssh.NewServerConn(conn, s.cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go s.serveSession(ch, chReqs)
	}
}

func (s *SSHServer) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer func() { _ = ch.Close() }()
	for req := range reqs {
		if req.Type != "exec" {
			_ = req.Reply(req.Type == "env", nil)
			continue
		}
		if len(req.Payload) < 4 {
			_ = req.Reply(false, nil)
			return
		}
		n := binary.BigEndian.Uint32(req.Payload)
		command := string(req.Payload[4 : 4+min(int(n), len(req.Payload)-4)])
		_ = req.Reply(true, nil)
		status := s.runGit(ch, command)
		_, _ = ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, uint32(status)))
		return
	}
}

// runGit runs "git-upload-pack '/name.git'" or "git-receive-pack …" against
// the server's root and returns the exit status.
func (s *SSHServer) runGit(ch ssh.Channel, command string) int {
	prog, arg, ok := strings.Cut(command, " ")
	if !ok || (prog != "git-upload-pack" && prog != "git-receive-pack") {
		_, _ = fmt.Fprintf(ch.Stderr(), "unsupported command %q\n", command)
		return 1
	}
	repo := strings.Trim(arg, "'\"")
	repo = filepath.Join(s.git.Root, filepath.Clean("/"+repo))
	cmd := exec.Command("git", strings.TrimPrefix(prog, "git-"), repo)
	cmd.Stdin, cmd.Stdout = ch, ch
	var stderr bytes.Buffer
	cmd.Stderr = io.MultiWriter(ch.Stderr(), &stderr)
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 1
	}
	return 0
}
