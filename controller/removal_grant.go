package controller

import "errors"

// grantFor is the grant a target is resolved with: decide's, except that a
// removal whose grant is refused by tenancy (the TenantPolicy that granted
// the Repository what it asks was deleted or narrowed, another one now
// selects its namespace too, or one that may select it cannot be
// evaluated) is resolved with no grant at all. A removal
// only takes the custom resource's files (and its sync file) out of its
// Repository's branch: it installs nothing anywhere and widens nothing, so
// a revocation must not keep the files of a deleted custom resource in
// Git, and its finalizer, forever. Any other error (a Secret no longer
// bound to the remote: nothing may be pushed with it) still stops it.
func grantFor(removal bool, decide func() (Grant, error)) (Grant, error) {
	g, err := decide()
	if err == nil || !removal {
		return g, err
	}
	if isTenancyRefusal(err) {
		return Grant{}, nil
	}
	return g, err
}

// isTenancyRefusal says err is the tenancy decision refusing what a
// Repository asks: NotPermitted, PolicyConflict or PolicyInvalid.
func isTenancyRefusal(err error) bool {
	var re *reasonError
	return errors.As(err, &re) && (re.reason == ReasonNotPermitted || re.reason == ReasonPolicyConflict || re.reason == ReasonPolicyInvalid)
}
