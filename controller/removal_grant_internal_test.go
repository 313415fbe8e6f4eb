package controller

import (
	"errors"
	"strings"
	"testing"
)

// TestARevokedGrantDoesNotHoldARemovalUp: a custom resource's removal is
// resolved with no grant when its TenantPolicy no longer grants what its
// Repository asks (or two policies now select its namespace), so its
// files leave Git and its finalizer goes; a write is still refused, and
// any other error (a Secret no longer bound) still stops the removal.
func TestARevokedGrantDoesNotHoldARemovalUp(t *testing.T) {
	granted := Grant{Policy: "team-a", AllowedNamespaces: []string{"team-a-cache"}, ServiceAccountName: "team-a-applier"}
	revoked := &reasonError{reason: ReasonNotPermitted, err: errors.New("spec.allowedNamespaces[0]: namespace \"team-a-cache\" is not granted")}
	conflict := &reasonError{reason: ReasonPolicyConflict, err: errors.New("namespace team-a is selected by more than one TenantPolicy")}
	invalid := &reasonError{reason: ReasonPolicyInvalid, err: errors.New("TenantPolicy generous: spec.namespaceSelector.matchExpressions[0]: invalid")}
	unbound := &reasonError{reason: ReasonCredentialNotBound, err: errors.New("secret team-a/git may not be sent to https://elsewhere.example/")}
	for _, tt := range []struct {
		name    string
		removal bool
		grant   Grant
		err     error
		want    Grant
		wantErr string
	}{
		{name: "a write uses the grant", grant: granted, want: granted},
		{name: "a removal uses the grant while it holds", removal: true, grant: granted, want: granted},
		{name: "a write is refused once the grant is revoked", err: revoked, wantErr: ReasonNotPermitted},
		{name: "a removal goes ahead with no grant once it is revoked", removal: true, err: revoked, want: Grant{}},
		{name: "a removal goes ahead with no grant when two policies conflict", removal: true, err: conflict, want: Grant{}},
		{name: "a write is refused when two policies conflict", err: conflict, wantErr: ReasonPolicyConflict},
		{name: "a removal goes ahead with no grant when a policy that may select the namespace cannot be evaluated", removal: true, err: invalid, want: Grant{}},
		{name: "a write is refused when a policy cannot be evaluated", err: invalid, wantErr: ReasonPolicyInvalid},
		{name: "a removal stops when the credentials are not bound", removal: true, err: unbound, wantErr: ReasonCredentialNotBound},
		{name: "a removal stops when the cluster cannot be read", removal: true, err: errors.New("list TenantPolicies: timeout"), wantErr: "timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := grantFor(tt.removal, func() (Grant, error) { return tt.grant, tt.err })
			if tt.wantErr != "" {
				var re *reasonError
				if err == nil || (!errors.As(err, &re) || re.reason != tt.wantErr) && !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Policy != tt.want.Policy || got.ServiceAccountName != tt.want.ServiceAccountName || len(got.AllowedNamespaces) != len(tt.want.AllowedNamespaces) {
				t.Errorf("grant %+v, want %+v", got, tt.want)
			}
		})
	}
}
