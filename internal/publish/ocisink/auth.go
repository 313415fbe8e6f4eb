package ocisink

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// authenticator picks the entry for reg from a .dockerconfigjson document:
// {"auths":{"host[:port]":{"auth":"base64(user:pass)"}}} or with
// "username"/"password", "identitytoken" or "registrytoken". Keys may carry
// a scheme and a path, as in "https://index.docker.io/v1/". Without a
// document or an entry the registry is accessed anonymously.
func authenticator(config []byte, reg name.Registry) (authn.Authenticator, error) {
	if len(config) == 0 {
		return authn.Anonymous, nil
	}
	var doc struct {
		Auths map[string]authn.AuthConfig `json:"auths"`
	}
	if err := json.Unmarshal(config, &doc); err != nil {
		return nil, fmt.Errorf("parse docker config JSON: %w", err)
	}
	for _, key := range slices.Sorted(maps.Keys(doc.Auths)) {
		if registryOf(key) == reg.RegistryStr() {
			return authn.FromConfig(doc.Auths[key]), nil
		}
	}
	return authn.Anonymous, nil
}

// registryOf normalizes a docker config key to a registry name.
func registryOf(key string) string {
	if _, rest, ok := strings.Cut(key, "://"); ok {
		key = rest
	}
	key, _, _ = strings.Cut(key, "/")
	if r, err := name.NewRegistry(key); err == nil {
		return r.RegistryStr()
	}
	return key
}
