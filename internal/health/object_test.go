package health

import (
	"math"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func fromYAML(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	// Decode as client-go does, so integers are int64 as read from the API.
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestObject(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want Verdict
	}{
		// Deployments, as kube-controller-manager writes their status.
		{
			name: "deployment available at the new generation is healthy",
			yaml: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps, generation: 5}
spec: {replicas: 3, progressDeadlineSeconds: 600}
status:
  observedGeneration: 5
  replicas: 3
  updatedReplicas: 3
  readyReplicas: 3
  availableReplicas: 3
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable, message: Deployment has minimum availability.}
  - {type: Progressing, status: "True", reason: NewReplicaSetAvailable, message: ReplicaSet "web-7d9c6b5f4" has successfully progressed.}
`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "deployment rolling out is pending",
			yaml: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps, generation: 6}
spec: {replicas: 3, progressDeadlineSeconds: 600}
status:
  observedGeneration: 6
  replicas: 4
  updatedReplicas: 1
  readyReplicas: 3
  availableReplicas: 3
  unavailableReplicas: 1
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable, message: Deployment has minimum availability.}
  - {type: Progressing, status: "True", reason: ReplicaSetUpdated, message: ReplicaSet "web-5f8d7c9b6" is progressing.}
`,
			want: Verdict{State: Pending, Reason: "LessUpdated", Message: "Updated: 1/3"},
		},
		{
			name: "deployment whose new generation is not observed is pending even if available",
			yaml: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps, generation: 7}
spec: {replicas: 3}
status:
  observedGeneration: 6
  replicas: 3
  updatedReplicas: 3
  readyReplicas: 3
  availableReplicas: 3
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable}
  - {type: Progressing, status: "True", reason: NewReplicaSetAvailable}
`,
			want: Verdict{State: Pending, Reason: "LatestGenerationNotObserved"},
		},
		{
			name: "deployment past its progress deadline fails with the controller's message",
			yaml: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps, generation: 6}
spec: {replicas: 3, progressDeadlineSeconds: 600}
status:
  observedGeneration: 6
  replicas: 4
  updatedReplicas: 1
  readyReplicas: 3
  availableReplicas: 3
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable}
  - {type: Progressing, status: "False", reason: ProgressDeadlineExceeded, message: ReplicaSet "web-5f8d7c9b6" has timed out progressing.}
`,
			want: Verdict{State: Failed, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-5f8d7c9b6" has timed out progressing.`},
		},
		{
			name: "statefulset with a pod not yet ready is pending",
			yaml: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: apps, generation: 2}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 3, readyReplicas: 2, currentReplicas: 3, updatedReplicas: 3, availableReplicas: 2, currentRevision: db-1, updateRevision: db-1}
`,
			want: Verdict{State: Pending, Reason: "LessReady"},
		},
		{
			name: "configmap is healthy",
			yaml: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: apps}, data: {a: b}}`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "load balancer service without a cluster IP is pending",
			yaml: `
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: apps}
spec: {type: LoadBalancer}
status: {loadBalancer: {}}
`,
			want: Verdict{State: Pending, Reason: "NoIPAssigned"},
		},
		{
			name: "load balancer service with a cluster IP is healthy (kstatus does not wait for an ingress IP)",
			yaml: `
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: apps}
spec: {type: LoadBalancer, clusterIP: 10.0.0.1}
status: {loadBalancer: {}}
`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "flux HelmRelease rendered by scribe uses its Ready condition",
			yaml: `
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: redis, namespace: apps, generation: 2}
status:
  observedGeneration: 2
  conditions:
  - {type: Ready, status: "True", reason: InstallSucceeded, message: "Helm install succeeded for release apps/redis.v1 with chart redis@20.1.0", observedGeneration: 2}
`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "object being deleted is pending",
			yaml: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: apps, deletionTimestamp: "2026-07-01T10:00:00Z"}}`,
			want: Verdict{State: Pending, Reason: ReasonTerminating},
		},

		// Argo Workflows.
		{
			name: "workflow succeeded is healthy",
			yaml: `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: migrate-x7k2p, namespace: apps}
status: {phase: Succeeded, startedAt: "2026-07-01T10:00:00Z", finishedAt: "2026-07-01T10:01:00Z", progress: 3/3}
`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "workflow failed fails with status.message",
			yaml: `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: migrate-x7k2p, namespace: apps}
status: {phase: Failed, message: "child 'migrate-x7k2p-123' failed", progress: 1/3}
`,
			want: Verdict{State: Failed, Reason: ReasonFailed, Message: "child 'migrate-x7k2p-123' failed"},
		},
		{
			name: "workflow error fails",
			yaml: `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: migrate-x7k2p, namespace: apps}
status: {phase: Error, message: "pod deleted"}
`,
			want: Verdict{State: Failed, Reason: ReasonFailed, Message: "pod deleted"},
		},
		{
			name: "workflow running is pending",
			yaml: `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: migrate-x7k2p, namespace: apps}
status: {phase: Running, progress: 1/3}
`,
			want: Verdict{State: Pending, Reason: ReasonProgressing},
		},
		{
			name: "workflow without status is pending",
			yaml: `{apiVersion: argoproj.io/v1alpha1, kind: Workflow, metadata: {name: w, namespace: apps}}`,
			want: Verdict{State: Pending, Reason: ReasonNotObserved},
		},

		// Cluster API.
		{
			name: "capi v1beta2 cluster available is healthy",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: prod-eu, namespace: fleet, generation: 4}
status:
  observedGeneration: 4
  phase: Provisioned
  initialization: {infrastructureProvisioned: true, controlPlaneInitialized: true}
  conditions:
  - {type: Available, status: "True", reason: Available, observedGeneration: 4, lastTransitionTime: "2026-07-01T10:00:00Z"}
  - {type: InfrastructureReady, status: "True", reason: Ready, observedGeneration: 4, lastTransitionTime: "2026-07-01T10:00:00Z"}
`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "capi v1beta2 cluster provisioned but not available is pending",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: prod-eu, namespace: fleet, generation: 4}
status:
  observedGeneration: 4
  phase: Provisioned
  conditions:
  - {type: Available, status: "False", reason: NotAvailable, message: "* WorkersAvailable: 0 available replicas, at least 3 required", observedGeneration: 4, lastTransitionTime: "2026-07-01T10:00:00Z"}
`,
			want: Verdict{State: Pending, Reason: "NotAvailable", Message: "* WorkersAvailable: 0 available replicas, at least 3 required"},
		},
		{
			name: "capi v1beta1 cluster ready is healthy",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: prod-eu, namespace: fleet, generation: 4}
status:
  observedGeneration: 4
  phase: Provisioned
  infrastructureReady: true
  controlPlaneReady: true
  conditions:
  - {type: Ready, status: "True", lastTransitionTime: "2026-07-01T10:00:00Z"}
  - {type: ControlPlaneReady, status: "True", lastTransitionTime: "2026-07-01T10:00:00Z"}
`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "capi v1beta1 cluster provisioning is pending",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: prod-eu, namespace: fleet, generation: 4}
status:
  observedGeneration: 4
  phase: Provisioning
  conditions:
  - {type: Ready, status: "False", severity: Info, reason: WaitingForControlPlane, lastTransitionTime: "2026-07-01T10:00:00Z"}
`,
			want: Verdict{State: Pending, Reason: "WaitingForControlPlane"},
		},
		{
			name: "capi cluster failed fails with the failure message",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: prod-eu, namespace: fleet, generation: 4}
status:
  observedGeneration: 4
  phase: Failed
  deprecated: {v1beta1: {failureReason: CreateError, failureMessage: "GCPManagedCluster fleet/prod-eu: network not found"}}
`,
			want: Verdict{State: Failed, Reason: ReasonFailed, Message: "GCPManagedCluster fleet/prod-eu: network not found"},
		},
		{
			name: "capi cluster provisioned without conditions is healthy",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: prod-eu, namespace: fleet, generation: 4}
status: {observedGeneration: 4, phase: Provisioned}
`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "capi cluster with an unobserved generation is pending",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: prod-eu, namespace: fleet, generation: 5}
status:
  observedGeneration: 4
  phase: Provisioned
  conditions:
  - {type: Available, status: "True", reason: Available, observedGeneration: 4, lastTransitionTime: "2026-07-01T10:00:00Z"}
`,
			want: Verdict{State: Pending, Reason: ReasonNotObserved},
		},

		// Crossplane-style managed resources.
		{
			name: "crossplane managed resource ready and synced is healthy",
			yaml: `
apiVersion: container.gcp.upbound.io/v1beta2
kind: Cluster
metadata: {name: gke-eu, generation: 3}
status:
  conditions:
  - {type: Ready, status: "True", reason: Available, lastTransitionTime: "2026-07-01T10:00:00Z", observedGeneration: 3}
  - {type: Synced, status: "True", reason: ReconcileSuccess, lastTransitionTime: "2026-07-01T10:00:00Z", observedGeneration: 3}
`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "crossplane managed resource not synced fails with its message",
			yaml: `
apiVersion: container.gcp.upbound.io/v1beta2
kind: Cluster
metadata: {name: gke-eu, generation: 3}
status:
  conditions:
  - {type: Ready, status: "True", reason: Available, lastTransitionTime: "2026-07-01T10:00:00Z"}
  - {type: Synced, status: "False", reason: ReconcileError, message: "update failed: googleapi: Error 403: Permission denied", lastTransitionTime: "2026-07-01T10:00:00Z"}
`,
			want: Verdict{State: Failed, Reason: ReasonNotSynced, Message: "update failed: googleapi: Error 403: Permission denied"},
		},
		{
			name: "crossplane managed resource creating is pending",
			yaml: `
apiVersion: container.gcp.upbound.io/v1beta2
kind: Cluster
metadata: {name: gke-eu, generation: 3}
status:
  conditions:
  - {type: Ready, status: "False", reason: Creating, lastTransitionTime: "2026-07-01T10:00:00Z"}
  - {type: Synced, status: "True", reason: ReconcileSuccess, lastTransitionTime: "2026-07-01T10:00:00Z"}
`,
			want: Verdict{State: Pending, Reason: "Creating"},
		},
		{
			name: "crossplane conditions from an older generation are pending",
			yaml: `
apiVersion: container.gcp.upbound.io/v1beta2
kind: Cluster
metadata: {name: gke-eu, generation: 4}
status:
  conditions:
  - {type: Ready, status: "True", reason: Available, observedGeneration: 3}
  - {type: Synced, status: "True", reason: ReconcileSuccess, observedGeneration: 3}
`,
			want: Verdict{State: Pending, Reason: ReasonNotObserved},
		},

		// Testkube.
		{
			name: "test workflow execution passed is healthy",
			yaml: `
apiVersion: testworkflows.testkube.io/v1
kind: TestWorkflowExecution
metadata: {name: smoke, namespace: testkube, generation: 2}
spec: {testWorkflow: {name: smoke}}
status:
  generation: 2
  latestExecution:
    id: 6650a1b2c3d4e5f6a7b8c9d0
    name: smoke-12
    number: 12
    workflow: {name: smoke}
    result:
      status: passed
      predictedStatus: passed
      queuedAt: "2026-07-01T10:00:00Z"
      startedAt: "2026-07-01T10:00:01Z"
      finishedAt: "2026-07-01T10:00:30Z"
      initialization: {status: passed}
      steps:
        rstep1: {status: passed, exitCode: 0}
`,
			want: Verdict{State: Healthy, Reason: ReasonHealthy},
		},
		{
			name: "test workflow execution failed fails with the failed step's message",
			yaml: `
apiVersion: testworkflows.testkube.io/v1
kind: TestWorkflowExecution
metadata: {name: smoke, namespace: testkube, generation: 2}
status:
  generation: 2
  latestExecution:
    name: smoke-12
    result:
      status: failed
      predictedStatus: failed
      initialization: {status: passed}
      steps:
        rstep2: {status: failed, exitCode: 1, errorMessage: "process exited with code 1"}
        rstep1: {status: passed, exitCode: 0}
`,
			want: Verdict{State: Failed, Reason: ReasonFailed, Message: "step rstep2: process exited with code 1"},
		},
		{
			name: "test workflow execution aborted fails",
			yaml: `
apiVersion: testworkflows.testkube.io/v1
kind: TestWorkflowExecution
metadata: {name: smoke, namespace: testkube, generation: 2}
status:
  generation: 2
  latestExecution: {name: smoke-12, result: {status: aborted}}
`,
			want: Verdict{State: Failed, Reason: ReasonFailed, Message: "test workflow execution smoke-12 aborted"},
		},
		{
			name: "test workflow execution running is pending",
			yaml: `
apiVersion: testworkflows.testkube.io/v1
kind: TestWorkflowExecution
metadata: {name: smoke, namespace: testkube, generation: 2}
status:
  generation: 2
  latestExecution: {name: smoke-12, result: {status: running, predictedStatus: passed}}
`,
			want: Verdict{State: Pending, Reason: ReasonProgressing},
		},
		{
			name: "test workflow execution of an older generation is pending",
			yaml: `
apiVersion: testworkflows.testkube.io/v1
kind: TestWorkflowExecution
metadata: {name: smoke, namespace: testkube, generation: 3}
status:
  generation: 2
  latestExecution: {name: smoke-12, result: {status: passed}}
`,
			want: Verdict{State: Pending, Reason: ReasonNotObserved},
		},
		{
			name: "test workflow execution that could not start fails with status.error",
			yaml: `
apiVersion: testworkflows.testkube.io/v1
kind: TestWorkflowExecution
metadata: {name: smoke, namespace: testkube, generation: 2}
status: {generation: 2, error: "test workflow smoke not found"}
`,
			want: Verdict{State: Failed, Reason: ReasonFailed, Message: "test workflow smoke not found"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := fromYAML(t, tt.yaml)
			got := Object(u)
			checkVerdict(t, got, tt.want)
			want := subject(u.GetKind(), u.GetNamespace(), u.GetName())
			if got.Subject != want {
				t.Errorf("Subject = %q, want %q", got.Subject, want)
			}
		})
	}
}

// TestObjectMalformed feeds objects with missing, nil and wrongly typed fields:
// none may panic, and none may be Healthy by accident of a crash path.
func TestObjectMalformed(t *testing.T) {
	objs := []map[string]any{
		nil,
		{},
		{"kind": 7, "apiVersion": []any{}},
		{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": "x", "status": "y"},
		{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"generation": "1"}, "status": map[string]any{"conditions": "x"}},
		{"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{"replicas": "3"}, "status": map[string]any{"conditions": []any{1, "x", nil}}},
		{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "status": map[string]any{"phase": 3}},
		{"apiVersion": "testworkflows.testkube.io/v1", "kind": "TestWorkflowExecution", "metadata": map[string]any{"generation": 1.5},
			"status": map[string]any{"latestExecution": map[string]any{"result": map[string]any{"status": "failed", "steps": []any{1}}}}},
		{"apiVersion": "testworkflows.testkube.io/v1", "kind": "TestWorkflowExecution",
			"status": map[string]any{"latestExecution": map[string]any{"result": map[string]any{"status": "failed", "steps": map[string]any{"a": 1, "b": nil}}}}},
		{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "status": map[string]any{"conditions": map[string]any{}, "phase": false}},
		{"apiVersion": "x.crossplane.io/v1", "kind": "Thing", "status": map[string]any{"conditions": []any{map[string]any{"type": "Synced", "observedGeneration": "2"}}}},
	}
	for i, o := range objs {
		var u *unstructured.Unstructured
		if o != nil {
			u = &unstructured.Unstructured{Object: o}
		}
		got := Object(u)
		if got.State == "" || got.Reason == "" {
			t.Errorf("#%d: incomplete verdict %+v", i, got)
		}
	}
	if got := Object(nil); got.State != Pending || got.Reason != ReasonNotFound {
		t.Errorf("Object(nil) = %v", got)
	}
	if got := Object(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": "x"}}); got.State == Healthy {
		t.Errorf("malformed Deployment is %v", got)
	}
}

func TestDeployment(t *testing.T) {
	replicas := int32(2)
	deadline := int32(600)
	base := func() *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Generation: 9},
			Spec:       appsv1.DeploymentSpec{Replicas: &replicas, ProgressDeadlineSeconds: &deadline},
			Status: appsv1.DeploymentStatus{
				ObservedGeneration: 9, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
				Conditions: []appsv1.DeploymentCondition{
					{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
					{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
				},
			},
		}
	}
	tests := []struct {
		name   string
		mutate func(d *appsv1.Deployment)
		want   Verdict
	}{
		{name: "available is healthy", want: Verdict{State: Healthy, Reason: ReasonHealthy}},
		{
			name: "new pods not available yet is pending",
			mutate: func(d *appsv1.Deployment) {
				d.Status.AvailableReplicas = 1
				d.Status.ReadyReplicas = 1
				d.Status.Conditions[1].Reason = "ReplicaSetUpdated"
			},
			want: Verdict{State: Pending, Reason: "LessAvailable", Message: "Available: 1/2"},
		},
		{
			name:   "generation not observed is pending",
			mutate: func(d *appsv1.Deployment) { d.Generation = 10 },
			want:   Verdict{State: Pending, Reason: "LatestGenerationNotObserved"},
		},
		{
			name: "progress deadline exceeded fails",
			mutate: func(d *appsv1.Deployment) {
				d.Status.Conditions[1] = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
					Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-6c9f" has timed out progressing.`}
			},
			want: Verdict{State: Failed, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-6c9f" has timed out progressing.`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := base()
			if tt.mutate != nil {
				tt.mutate(d)
			}
			got := Deployment(d)
			checkVerdict(t, got, tt.want)
			if got.Subject != "Deployment/apps/web" {
				t.Errorf("Subject = %q", got.Subject)
			}
		})
	}
	if got := Deployment(nil); got.State != Pending || got.Reason != ReasonNotFound {
		t.Errorf("Deployment(nil) = %v", got)
	}
}

func TestRestarts(t *testing.T) {
	pod := func(counts ...int32) corev1.Pod {
		var p corev1.Pod
		for _, c := range counts {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{RestartCount: c})
		}
		return p
	}
	withInit := pod(1)
	withInit.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "istio-proxy", RestartCount: 2}}
	tests := []struct {
		name string
		pods []corev1.Pod
		want int32
	}{
		{name: "no pods", want: 0},
		{name: "pods without statuses", pods: []corev1.Pod{{}, {}}, want: 0},
		{name: "sums containers across pods", pods: []corev1.Pod{pod(1, 2), pod(0), pod(4)}, want: 7},
		{name: "counts init and sidecar containers", pods: []corev1.Pod{withInit}, want: 3},
		{name: "ignores negative counts", pods: []corev1.Pod{pod(-5, 2)}, want: 2},
		{name: "saturates instead of overflowing", pods: []corev1.Pod{pod(math.MaxInt32, math.MaxInt32), pod(1)}, want: math.MaxInt32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Restarts(tt.pods); got != tt.want {
				t.Errorf("Restarts = %d, want %d", got, tt.want)
			}
		})
	}
}
