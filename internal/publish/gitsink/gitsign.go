package gitsink

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/go-git/go-git/v5"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Keys of a signing Secret.
const (
	// SecretGPGKey holds an ASCII-armored OpenPGP private key.
	SecretGPGKey = "git.asc"
	// SecretSSHSigningKey holds an OpenSSH private key.
	SecretSSHSigningKey = "identity"
	// SecretPassphrase decrypts either key.
	SecretPassphrase = "passphrase"
)

// GPGSigner signs commits with an armored OpenPGP private key, as
// `git commit -S` does with gpg.format=openpgp.
func GPGSigner(armoredKey []byte, passphrase string) (git.Signer, error) {
	keys, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(armoredKey))
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if len(keys) == 0 || keys[0].PrivateKey == nil {
		return nil, errors.New("signing key: no OpenPGP private key in " + SecretGPGKey)
	}
	e := keys[0]
	if e.PrivateKey.Encrypted {
		if passphrase == "" {
			return nil, errors.New("signing key: the key is encrypted and " + SecretPassphrase + " is empty")
		}
		if err := e.DecryptPrivateKeys([]byte(passphrase)); err != nil {
			return nil, fmt.Errorf("signing key: wrong %s: %w", SecretPassphrase, err)
		}
	}
	return gpgSigner{entity: e}, nil
}

type gpgSigner struct{ entity *openpgp.Entity }

func (s gpgSigner) Sign(message io.Reader) ([]byte, error) {
	var b bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&b, s.entity, message, &packet.Config{}); err != nil {
		return nil, fmt.Errorf("gpg sign: %w", err)
	}
	return b.Bytes(), nil
}

// SSHSigner signs commits with an SSH private key in git's SSH signature
// format (gpg.format=ssh: an armored SSHSIG over namespace "git").
func SSHSigner(privateKey []byte, passphrase string) (git.Signer, error) {
	var signer ssh.Signer
	var err error
	if passphrase != "" {
		signer, err = ssh.ParsePrivateKeyWithPassphrase(privateKey, []byte(passphrase))
	} else {
		signer, err = ssh.ParsePrivateKey(privateKey)
	}
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	return sshSigner{signer: signer}, nil
}

type sshSigner struct{ signer ssh.Signer }

func (s sshSigner) Sign(message io.Reader) ([]byte, error) {
	sig, err := sshsig.Sign(message, s.signer, sshsig.HashSHA512, "git")
	if err != nil {
		return nil, fmt.Errorf("ssh sign: %w", err)
	}
	return sshsig.Armor(sig), nil
}

// SignerFromSecret makes the signer a Repository's spec.git.signing asks
// for: format "gpg" reads "git.asc", format "ssh" reads "identity"; both take
// an optional "passphrase".
func SignerFromSecret(format string, data map[string][]byte) (git.Signer, error) {
	pass := string(bytes.TrimRight(data[SecretPassphrase], "\r\n"))
	switch format {
	case "gpg":
		if len(data[SecretGPGKey]) == 0 {
			return nil, fmt.Errorf("signing secret: format gpg needs %q", SecretGPGKey)
		}
		return GPGSigner(data[SecretGPGKey], pass)
	case "ssh":
		if len(data[SecretSSHSigningKey]) == 0 {
			return nil, fmt.Errorf("signing secret: format ssh needs %q", SecretSSHSigningKey)
		}
		return SSHSigner(data[SecretSSHSigningKey], pass)
	}
	return nil, fmt.Errorf("signing: format %q is not gpg or ssh", format)
}
