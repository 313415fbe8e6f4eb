package render_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// testkubeExperiment is an agent evaluation in namespace lab on the hub,
// with a trigger; tkNamespace, unless "", is spec.workflow.testkube.namespace.
func testkubeExperiment(tkNamespace string) map[string]any {
	exp := hubExperiment()
	tk := map[string]any{
		"scenarios":        []any{map[string]any{"name": "refund", "input": "I want a refund"}},
		"agentRef":         map[string]any{"name": "router-agent"},
		"llmAsAJudgeModel": "gpt-judge-small",
		"judgeURL":         "http://llm-judge.ml.svc.cluster.local/v1/chat/completions",
		"trigger":          map[string]any{"enabled": true},
	}
	if tkNamespace != "" {
		tk["namespace"] = tkNamespace
	}
	exp["spec"].(map[string]any)["workflow"] = map[string]any{"engine": "testkube", "testkube": tk}
	return exp
}

// isTestkubeObject reports whether o is one of the objects of an agent
// evaluation: the TestWorkflow, its experiment.json ConfigMap, the
// TestWorkflowExecution or the TestTrigger.
func isTestkubeObject(o map[string]any) bool {
	av, _ := o["apiVersion"].(string)
	return strings.HasSuffix(strings.Split(av, "/")[0], "testkube.io") || o["kind"] == "ConfigMap"
}

// TestTestkubeObjectsRenderIntoTestkubesNamespace: the TestWorkflow, its
// experiment.json ConfigMap, the TestWorkflowExecution and the TestTrigger
// are rendered into Testkube's namespace (testkube unless
// spec.workflow.testkube.namespace names another), where Testkube watches,
// resolves the agent-eval templates and runs the pods; their names carry
// the Experiment's namespace and name, the label scribe.dev/namespace the
// Experiment's namespace, the trigger selects the TestWorkflow there and
// the read-back follows the execution there. Everything else stays in the
// Experiment's namespace.
func TestTestkubeObjectsRenderIntoTestkubesNamespace(t *testing.T) {
	agentEvalIn := func(ns string) string {
		return `package catalog
entries: "agent-eval": {override: true, kind: "workflow", ` + ns + `source: {type: "oci", url: "oci://registry.example.com/agent-eval", tag: "1"}, workflowTemplate: "agent-eval", #Params: {}}`
	}
	for _, tt := range []struct {
		name    string
		tkNS    string // spec.workflow.testkube.namespace
		catalog string // a user catalog, or ""
		allowed []string
		wantNS  string
	}{
		{name: "by default into testkube", wantNS: "testkube"},
		{name: "testkube named explicitly", tkNS: "testkube", wantNS: "testkube"},
		{name: "an allowed namespace the agent-eval templates are delivered into", tkNS: "team-tk", allowed: []string{"team-tk"},
			catalog: agentEvalIn(`namespace: "team-tk", `), wantNS: "team-tk"},
		{name: "the Experiment's namespace, with agent-eval delivered into it", tkNS: "lab",
			catalog: agentEvalIn(""), wantNS: "lab"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := renderTestkube(t, tt.tkNS, tt.catalog, tt.allowed, scribev1.StageWorkflow)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]bool{}
			for _, o := range renderedObjects(t, b) {
				name, ns := str(o, "metadata", "name"), str(o, "metadata", "namespace")
				if !isTestkubeObject(o) {
					if av, _ := o["apiVersion"].(string); strings.HasPrefix(av, "kustomize.config.k8s.io/") {
						continue // the directory's kustomization.yaml
					}
					if ns != "lab" && o["kind"] != "AppProject" && (o["kind"] != "Kustomization" || ns != "flux-system") {
						t.Errorf("%s %s rendered into %q, not the Experiment's namespace", o["kind"], name, ns)
					}
					continue
				}
				kinds[o["kind"].(string)] = true
				if ns != tt.wantNS {
					t.Errorf("%s %s rendered into %q, want Testkube's %q", o["kind"], name, ns, tt.wantNS)
				}
				if !strings.HasPrefix(name, "lab-tenancy-") {
					t.Errorf("%s %s: the name does not carry the Experiment's namespace and name (lab-tenancy-)", o["kind"], name)
				}
				labels, _ := o["metadata"].(map[string]any)["labels"].(map[string]any)
				if labels["scribe.dev/namespace"] != "lab" || labels["scribe.dev/experiment"] != "tenancy" {
					t.Errorf("%s %s labels %v, want scribe.dev/experiment tenancy and scribe.dev/namespace lab", o["kind"], name, labels)
				}
				if o["kind"] == "TestTrigger" {
					if got := str(o, "spec", "testSelector", "namespace"); got != tt.wantNS || str(o, "spec", "testSelector", "name") != tkName("lab", "tenancy", "evaluation") {
						t.Errorf("TestTrigger selects %s/%s, want %s/%s", got, str(o, "spec", "testSelector", "name"), tt.wantNS, tkName("lab", "tenancy", "evaluation"))
					}
					if got := str(o, "spec", "resourceSelector", "namespace"); got != "lab" {
						t.Errorf("TestTrigger watches the agent's Deployment in %q, want the agent's namespace lab", got)
					}
				}
			}
			for _, k := range []string{"ConfigMap", "TestWorkflow", "TestWorkflowExecution", "TestTrigger"} {
				if !kinds[k] {
					t.Errorf("no %s rendered", k)
				}
			}
			if w := b.ReadBack.Workflow; w == nil || w.Kind != "TestWorkflowExecution" || w.Namespace != tt.wantNS {
				t.Errorf("read-back workflow %+v, want the TestWorkflowExecution in %q", w, tt.wantNS)
			}
		})
	}
}

// TestTestkubeNamespaceTheTenantMayNotUseIsRefused: a Testkube namespace
// that is neither the Experiment's, nor one the Repository allows, nor the
// built-in agent-eval entry's is refused naming
// spec.workflow.testkube.namespace and spec.allowedNamespaces; and one the
// agent-eval templates are not delivered into (a TestWorkflow's `use:`
// resolves them in its own namespace) is refused naming the field and
// where they are.
func TestTestkubeNamespaceTheTenantMayNotUseIsRefused(t *testing.T) {
	const teamTK = `package catalog
entries: "agent-eval": {override: true, kind: "workflow", namespace: "team-tk", source: {type: "oci", url: "oci://registry.example.com/agent-eval", tag: "1"}, workflowTemplate: "agent-eval", #Params: {}}`
	for _, tt := range []struct {
		name    string
		tkNS    string
		catalog string
		allowed []string
		want    []string
	}{
		{name: "a namespace the Repository does not allow", tkNS: "kube-system",
			want: []string{`"kube-system"`, "spec.allowedNamespaces", `Experiment's namespace "lab"`}},
		{name: "an allowed namespace the templates are not delivered into", tkNS: "team-tk", allowed: []string{"team-tk"},
			want: []string{`"team-tk"`, `delivered ("testkube"`, "agent-eval"}},
		{name: "the Experiment's namespace while the templates go to testkube", tkNS: "lab",
			want: []string{`"lab"`, `delivered ("testkube"`}},
		{name: "testkube while an override delivers the templates elsewhere", catalog: teamTK, allowed: []string{"team-tk"},
			want: []string{`"testkube"`, `delivered ("team-tk"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderTestkube(t, tt.tkNS, tt.catalog, tt.allowed, 0)
			var ie *render.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("got %v, want an InputError", err)
			}
			if len(ie.Errors) != 1 || ie.Errors[0].Path != "spec.workflow.testkube.namespace" {
				t.Fatalf("errors %+v, want one, on spec.workflow.testkube.namespace", ie.Errors)
			}
			for _, w := range tt.want {
				if !strings.Contains(ie.Errors[0].Message, w) {
					t.Errorf("message lacks %q:\n%s", w, ie.Errors[0].Message)
				}
			}
		})
	}
}

// TestArgoCDAppProjectAllowsTestkubesNamespaceFromTheFirstStage: under
// Argo CD the Experiment's own Application applies the Testkube objects
// into Testkube's namespace, so its AppProject allows that namespace on
// the hub from stage 1 on, before any Testkube object is committed.
func TestArgoCDAppProjectAllowsTestkubesNamespaceFromTheFirstStage(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, stage := range []int32{scribev1.StageClusters, scribev1.StageWorkflow} {
		b, err := e.Render(context.Background(), render.Input{Object: testkubeExperiment(""), Publish: argoPublish(), Resolved: testResolved, Stage: stage})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, o := range renderedObjects(t, b) {
			if o["kind"] != "AppProject" {
				continue
			}
			for _, d := range o["spec"].(map[string]any)["destinations"].([]any) {
				m := d.(map[string]any)
				if str(m, "server") == "https://kubernetes.default.svc" && str(m, "namespace") == "testkube" {
					found = true
				}
			}
			if !found {
				t.Errorf("stage %d: the AppProject's destinations %v do not allow testkube on the hub", stage, o["spec"].(map[string]any)["destinations"])
			}
		}
		if !found && stage == scribev1.StageClusters {
			t.Fatal("no AppProject allowing testkube at stage 1")
		}
	}
}

// renderTestkube renders testkubeExperiment(tkNS) at stage (0: the final
// tree), with catalog as a user catalog when it is not empty and allowed
// as the Repository's spec.allowedNamespaces.
func renderTestkube(t *testing.T, tkNS, catalog string, allowed []string, stage int32) (*render.Bundle, error) {
	t.Helper()
	var opts []render.Option
	if catalog != "" {
		opts = append(opts, render.WithCatalog("./team", fstest.MapFS{"entries.cue": {Data: []byte(catalog)}}))
	}
	e, err := render.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	pub := render.DefaultPublish()
	pub.AllowedNamespaces = allowed
	return e.Render(context.Background(), render.Input{Object: testkubeExperiment(tkNS), Publish: pub, Resolved: testResolved, Stage: stage})
}

// tkName is the name of an Experiment's object in Testkube's shared
// namespace: <ns>-<name>-<8 hex digits of sha256(ns/name)>-<what>.
func tkName(ns, name, what string) string {
	sum := sha256.Sum256([]byte(ns + "/" + name))
	return ns + "-" + name + "-" + hex.EncodeToString(sum[:])[:8] + "-" + what
}

// TestTestkubeNamesAreOneToOne: two Experiments whose namespace and name
// join to the same string, (team, a-web) and (team-a, web), get different
// names in Testkube's shared namespace, so one tenant cannot take the
// other's.
func TestTestkubeNamesAreOneToOne(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, id := range [][2]string{{"team", "a-web"}, {"team-a", "web"}} {
		obj := testkubeExperiment("testkube")
		md := obj["metadata"].(map[string]any)
		md["namespace"], md["name"] = id[0], id[1]
		pub := render.DefaultPublish()
		pub.AllowedNamespaces = []string{"testkube"}
		b, err := e.Render(context.Background(), render.Input{Object: obj, Publish: pub, Resolved: testResolved})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range renderedObjects(t, b) {
			if str(o, "metadata", "namespace") != "testkube" {
				continue
			}
			key := fmt.Sprint(o["kind"], "/", str(o, "metadata", "name"))
			if prev, dup := names[key]; dup {
				t.Errorf("%s is rendered for both %s and %s/%s", key, prev, id[0], id[1])
			}
			names[key] = id[0] + "/" + id[1]
		}
	}
	if len(names) == 0 {
		t.Fatal("no object rendered into testkube")
	}
}

// TestTestkubeRunsTheNamedWorkflowTemplate: spec.workflow.template names
// the evaluation's catalog entry for Testkube too (agent-eval when empty),
// so a name the catalog lacks is refused there.
func TestTestkubeRunsTheNamedWorkflowTemplate(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	exp := testkubeExperiment("")
	exp["spec"].(map[string]any)["workflow"].(map[string]any)["template"] = "no-such-eval"
	_, err = e.Render(context.Background(), render.Input{Object: exp, Publish: render.DefaultPublish(), Resolved: testResolved})
	var ie *render.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("got %v, want an InputError", err)
	}
	if len(ie.Errors) == 0 || ie.Errors[0].Path != "spec.workflow.template" || !strings.Contains(ie.Errors[0].Message, "no-such-eval") {
		t.Fatalf("errors %+v, want one on spec.workflow.template naming no-such-eval", ie.Errors)
	}
}
