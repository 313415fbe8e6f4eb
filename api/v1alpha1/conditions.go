package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GetConditions returns the status conditions.
func (in *Repository) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *Repository) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetConditions returns the status conditions.
func (in *Workload) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *Workload) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetConditions returns the status conditions.
func (in *Experiment) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *Experiment) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// SetLastHandledReconcileRequest records the reconcile.fluxcd.io/requestedAt
// value a reconcile handled.
func (in *Repository) SetLastHandledReconcileRequest(v string) { in.Status.LastHandledReconcileAt = v }

// SetLastHandledReconcileRequest records the reconcile.fluxcd.io/requestedAt
// value a reconcile handled.
func (in *Workload) SetLastHandledReconcileRequest(v string) { in.Status.LastHandledReconcileAt = v }

// SetLastHandledReconcileRequest records the reconcile.fluxcd.io/requestedAt
// value a reconcile handled.
func (in *Experiment) SetLastHandledReconcileRequest(v string) { in.Status.LastHandledReconcileAt = v }
