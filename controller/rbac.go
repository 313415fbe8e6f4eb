package controller

// Permissions the manager itself needs beyond those of its reconcilers
// (whose markers sit next to each Reconcile). controller/rbac_test.go
// checks every marker and config/rbac against DESIGN.md's one invariant.

// Leader election (--leader-elect) holds a Lease.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
