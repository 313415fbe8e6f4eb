package health

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The component GitRepository as source-controller reports it.
const (
	readySource = `
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: exp-app-web, namespace: lab, generation: 1}
status:
  observedGeneration: 1
  artifact: {revision: "main@sha1:0123456789abcdef0123456789abcdef01234567", digest: "sha256:aa", url: "http://source-controller/gitrepository/lab/exp-app-web/0123.tar.gz"}
  conditions:
  - {type: Ready, status: "True", reason: Succeeded, observedGeneration: 1, message: "stored artifact for revision 'main@sha1:0123456'"}
`
	failingSource = `
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: exp-app-web, namespace: lab, generation: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Ready, status: "False", reason: GitOperationFailed, observedGeneration: 1, message: "failed to checkout and determine revision: unable to clone"}
`
)

func TestDelivery(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		src  string
		want Verdict
	}{
		{
			name: "kustomization ready at its generation is healthy",
			yaml: `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: exp-app-web, namespace: lab, generation: 2}
status:
  observedGeneration: 2
  conditions:
  - {type: Ready, status: "True", reason: ReconciliationSucceeded, observedGeneration: 2, message: "Applied revision: main@sha1:0123456"}
`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy, Message: "Applied revision: main@sha1:0123456"},
		},
		{
			name: "kustomization that failed before a reconcile it has not handled yet is pending, not failed",
			yaml: `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: exp-app-web, namespace: lab, generation: 1, annotations: {reconcile.fluxcd.io/requestedAt: "2026-11-28T00:10:00Z"}}
status:
  observedGeneration: 1
  lastHandledReconcileAt: "2026-11-28T00:00:00Z"
  conditions:
  - {type: Ready, status: "False", reason: ReconciliationFailed, observedGeneration: 1, message: "dial tcp 10.0.0.1:6443: connect: connection refused"}
`,
			want: Verdict{State: Pending, Reason: ReasonRetryRequested, Message: "a reconcile requested at 2026-11-28T00:10:00Z is not handled yet; before it: dial tcp 10.0.0.1:6443: connect: connection refused"},
		},
		{
			name: "kustomization that failed after handling the reconcile requested fails",
			yaml: `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: exp-app-web, namespace: lab, generation: 1, annotations: {reconcile.fluxcd.io/requestedAt: "2026-11-28T00:10:00Z"}}
status:
  observedGeneration: 1
  lastHandledReconcileAt: "2026-11-28T00:10:00Z"
  conditions:
  - {type: Ready, status: "False", reason: ReconciliationFailed, observedGeneration: 1, message: "dial tcp 10.0.0.1:6443: connect: connection refused"}
`,
			want: Verdict{State: Failed, Reason: "ReconciliationFailed", Message: "dial tcp 10.0.0.1:6443: connect: connection refused"},
		},
		{
			name: "application degraded with a refresh still requested is pending",
			yaml: `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: exp-app-web, namespace: lab, annotations: {argocd.argoproj.io/refresh: normal}}
status:
  conditions:
  - {type: ComparisonError, message: "failed to load live state: connection refused"}
`,
			want: Verdict{State: Pending, Reason: ReasonRetryRequested, Message: "a refresh (normal) is requested and not done yet; before it: failed to load live state: connection refused"},
		},
		{
			name: "kustomization whose path is missing in a ready source fails with Flux's message",
			yaml: `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: exp-app-web, namespace: lab, generation: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Ready, status: "False", reason: ArtifactFailed, observedGeneration: 1, message: "kustomization path not found: stat /tmp/kustomization-1/apps/missing: no such file or directory"}
`,
			src:  readySource,
			want: Verdict{State: Failed, Reason: "ArtifactFailed", Message: "kustomization path not found: stat /tmp/kustomization-1/apps/missing: no such file or directory"},
		},
		{
			name: "kustomization waiting for a source that has no artifact yet is pending",
			yaml: `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: exp-app-web, namespace: lab, generation: 1}
status:
  observedGeneration: -1
  conditions:
  - {type: Ready, status: "False", reason: ArtifactFailed, observedGeneration: 1, message: "Source artifact not found, retrying in 30s"}
`,
			src:  failingSource,
			want: Verdict{State: Pending, Reason: "ArtifactFailed", Message: "Source artifact not found, retrying in 30s"},
		},
		{
			name: "kustomization with artifact failure and an unknown source is pending",
			yaml: `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: exp-app-web, namespace: lab, generation: 1}
status:
  conditions:
  - {type: Ready, status: "False", reason: ArtifactFailed, observedGeneration: 1, message: "Source is not ready, artifact not found, retrying in 30s"}
`,
			want: Verdict{State: Pending, Reason: "ArtifactFailed", Message: "Source is not ready, artifact not found, retrying in 30s"},
		},
		{
			name: "kustomization whose build fails is failed",
			yaml: `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: exp-app-web, namespace: lab, generation: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Ready, status: "False", reason: BuildFailed, observedGeneration: 1, message: "kustomize build failed: accumulating resources"}
`,
			src:  readySource,
			want: Verdict{State: Failed, Reason: "BuildFailed", Message: "kustomize build failed: accumulating resources"},
		},
		{
			name: "kustomization waiting for dependencies is pending",
			yaml: `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: exp-app-web, namespace: lab, generation: 1}
status:
  conditions:
  - {type: Ready, status: "False", reason: DependencyNotReady, observedGeneration: 1, message: "dependency 'lab/exp-base-x' is not ready"}
`,
			src:  readySource,
			want: Verdict{State: Pending, Reason: "DependencyNotReady", Message: "dependency 'lab/exp-base-x' is not ready"},
		},
		{
			name: "kustomization ready for an older generation is pending",
			yaml: `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: exp-app-web, namespace: lab, generation: 3}
status:
  observedGeneration: 2
  conditions:
  - {type: Ready, status: "True", reason: ReconciliationSucceeded, observedGeneration: 2, message: "Applied revision: main@sha1:0123456"}
`,
			want: Verdict{State: Pending, Reason: ReasonNotObserved},
		},
		{
			name: "kustomization stalled on a terminal error is failed",
			yaml: `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: exp-app-web, namespace: lab, generation: 1}
status:
  conditions:
  - {type: Stalled, status: "True", reason: InvalidCELExpression, observedGeneration: 1, message: "invalid CEL expression"}
  - {type: Ready, status: "False", reason: InvalidCELExpression, observedGeneration: 1, message: "invalid CEL expression"}
`,
			want: Verdict{State: Failed, Reason: ReasonStalled, Message: "invalid CEL expression"},
		},
		{
			name: "kustomization not reconciled yet is pending",
			yaml: `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: exp-app-web, namespace: lab, generation: 1}
`,
			want: Verdict{State: Pending, Reason: ReasonNotObserved},
		},
		{
			name: "suspended kustomization is pending",
			yaml: `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: exp-app-web, namespace: lab, generation: 1}
spec: {suspend: true}
`,
			want: Verdict{State: Pending, Reason: ReasonSuspended},
		},
		{
			name: "helmrelease whose install failed is failed",
			yaml: `
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: exp-app-ingress, namespace: lab, generation: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Ready, status: "False", reason: InstallFailed, observedGeneration: 1, message: "Helm install failed for release ingress-nginx/ingress-nginx with chart ingress-nginx@4.12.3: context deadline exceeded"}
`,
			want: Verdict{State: Failed, Reason: "InstallFailed", Message: "Helm install failed for release ingress-nginx/ingress-nginx with chart ingress-nginx@4.12.3: context deadline exceeded"},
		},
		{
			name: "helmrelease with its chart not ready is pending",
			yaml: `
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: exp-app-ingress, namespace: lab, generation: 1}
status:
  conditions:
  - {type: Ready, status: "False", reason: ArtifactFailed, observedGeneration: 1, message: "HelmChart 'lab/lab-exp-app-ingress' is not ready"}
`,
			want: Verdict{State: Pending, Reason: "ArtifactFailed"},
		},
		{
			name: "helmrelease installed is healthy",
			yaml: `
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: exp-app-ingress, namespace: lab, generation: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Ready, status: "True", reason: InstallSucceeded, observedGeneration: 1, message: "Helm install succeeded"}
`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy, Message: "Helm install succeeded"},
		},
		{
			name: "argo application synced and healthy is healthy",
			yaml: `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: exp-app-web, namespace: argocd}
status:
  sync: {status: Synced}
  health: {status: Healthy}
`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "argo application with a comparison error is failed",
			yaml: `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: exp-app-web, namespace: argocd}
status:
  sync: {status: Unknown}
  health: {status: Missing}
  conditions:
  - {type: ComparisonError, message: "apps/missing: app path does not exist"}
`,
			want: Verdict{State: Failed, Reason: ReasonComparisonError, Message: "apps/missing: app path does not exist"},
		},
		{
			name: "argo application whose target cluster is not registered is pending",
			yaml: `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: exp-sandbox-web, namespace: lab}
status:
  sync: {status: Unknown}
  health: {status: Unknown}
  conditions:
  - {type: InvalidSpecError, message: "there are no clusters with this name: exp-sandbox"}
`,
			want: Verdict{State: Pending, Reason: ReasonDestinationNotRegistered, Message: "there are no clusters with this name: exp-sandbox"},
		},
		{
			name: "argo application still syncing is pending",
			yaml: `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: exp-app-web, namespace: argocd}
status:
  operationState: {phase: Running, message: "waiting for healthy state of apps/Deployment/web"}
  sync: {status: OutOfSync}
  health: {status: Progressing}
`,
			want: Verdict{State: Pending, Reason: ReasonOperationInProgress},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := fromYAML(t, tt.yaml)
			var src *unstructured.Unstructured
			if tt.src != "" {
				src = fromYAML(t, tt.src)
			}
			got := Delivery(u, src)
			checkVerdict(t, got, tt.want)
			if want := subject(u.GetKind(), u.GetNamespace(), u.GetName()); got.Subject != want {
				t.Errorf("Subject = %q, want %q", got.Subject, want)
			}
		})
	}
	if got := Delivery(nil, nil); got.State != Pending || got.Reason != ReasonNotFound {
		t.Errorf("Delivery(nil) = %v, want Pending/NotFound", got)
	}
}
