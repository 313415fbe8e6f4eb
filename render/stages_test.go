package render_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/render"
)

// experimentFixtures are the valid fixtures that are Experiments.
func experimentFixtures(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, file := range validFixtures(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("\nkind: Experiment\n")) {
			out = append(out, file)
		}
	}
	if len(out) == 0 {
		t.Fatal("no Experiment among the valid fixtures")
	}
	return out
}

// renderStage renders file's Experiment at commit stage n (0: the final tree).
func renderStage(t *testing.T, e *render.Engine, file string, n int32) *render.Bundle {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render.ObjectsFromYAML(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: want one object, got %d (%v)", file, len(objs), err)
	}
	b, err := e.Render(context.Background(), render.Input{Object: objs[0], Publish: render.DefaultPublish(), Resolved: testResolved, Stage: n})
	if err != nil {
		t.Fatalf("render %s at stage %d: %v", file, n, err)
	}
	return b
}

// objectsByKind counts a bundle's objects by kind.
func objectsByKind(b *render.Bundle) map[string]int {
	out := map[string]int{}
	for _, o := range b.Objects {
		out[o.Kind]++
	}
	return out
}

// TestExperimentStagesMatchGoldenTrees renders every Experiment fixture at
// each commit stage and compares it with its golden tree under
// fixtures/golden-stages/<fixture>/stage-<n> (-update rewrites them).
func TestExperimentStagesMatchGoldenTrees(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range experimentFixtures(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		for n := scribev1.StageClusters; n <= scribev1.StageWorkflow; n++ {
			t.Run(name+"/stage-"+fmt.Sprint(n), func(t *testing.T) {
				b := renderStage(t, e, file, n)
				golden := filepath.Join(fixturesDir, "golden-stages", name, "stage-"+fmt.Sprint(n))
				if *update {
					if err := os.RemoveAll(golden); err != nil {
						t.Fatal(err)
					}
					if err := publish.WriteDir(golden, []*render.Bundle{b}); err != nil {
						t.Fatal(err)
					}
				}
				want := readTree(t, golden)
				got := map[string][]byte{}
				for _, f := range b.Files {
					got[f.Path] = f.Data
				}
				paths := make([]string, 0, len(want)+len(got))
				for p := range want {
					paths = append(paths, p)
				}
				for p := range got {
					if _, ok := want[p]; !ok {
						paths = append(paths, p)
					}
				}
				sort.Strings(paths)
				for _, p := range paths {
					if !bytes.Equal(want[p], got[p]) {
						t.Errorf("%s differs from the golden tree (go test ./render -run TestExperimentStagesMatchGoldenTrees -update if intended):\n--- golden\n%s\n--- rendered\n%s", p, want[p], got[p])
					}
				}
			})
		}
	}
}

// TestExperimentStagesAddInOrder: each stage's tree holds the previous
// stage's objects unchanged; no run (Argo Workflow, TestWorkflowExecution,
// TestTrigger) exists before stage 4, no workflow template delivery or
// TestWorkflow before stage 3, no component delivery before stage 2; the
// final tree is stage 4's; and the read-back names only what the stage
// renders.
func TestExperimentStagesAddInOrder(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	runKinds := []string{"Workflow", "TestWorkflowExecution", "TestTrigger"}
	for _, file := range experimentFixtures(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			var prev *render.Bundle
			for n := scribev1.StageClusters; n <= scribev1.StageWorkflow; n++ {
				b := renderStage(t, e, file, n)
				kinds := objectsByKind(b)
				for _, k := range runKinds {
					if n < scribev1.StageWorkflow && kinds[k] > 0 {
						t.Errorf("stage %d renders a %s", n, k)
					}
				}
				if n < scribev1.StageWorkflowTemplates && (kinds["TestWorkflow"] > 0 || len(b.ReadBack.Templates) > 0) {
					t.Errorf("stage %d renders the workflow templates: %v", n, kinds)
				}
				if n < scribev1.StageWorkflow && (b.ReadBack.Workflow != nil || len(b.ReadBack.Runs) > 0) {
					t.Errorf("stage %d reads back runs it does not render", n)
				}
				for _, tg := range b.ReadBack.Targets {
					if n < scribev1.StageComponents && len(tg.Components) > 0 {
						t.Errorf("stage %d reads back components of target %s", n, tg.Name)
					}
				}
				if n >= scribev1.StageWorkflowTemplates && b.ReadBack.Templates == nil && bytes.Contains(mustRead(t, file), []byte("workflow:")) {
					t.Errorf("stage %d has no workflow template to read back", n)
				}
				if prev != nil {
					files := map[string][]byte{}
					for _, f := range b.Files {
						files[f.Path] = f.Data
					}
					for _, f := range prev.Files {
						if strings.HasSuffix(f.Path, "/kustomization.yaml") || strings.HasSuffix(f.Path, "/.scribe.json") {
							continue
						}
						if !bytes.Equal(files[f.Path], f.Data) {
							t.Errorf("stage %d drops or changes %s of stage %d", n, f.Path, n-1)
						}
					}
				}
				prev = b
			}
			if final := renderStage(t, e, file, 0); final.Digest != prev.Digest {
				t.Errorf("the final tree (%s) is not stage 4's (%s)", final.Digest, prev.Digest)
			}
			if _, err := e.Render(context.Background(), render.Input{Object: objectOf(t, file), Publish: render.DefaultPublish(), Resolved: testResolved, Stage: 5}); err == nil || !strings.Contains(err.Error(), "stage") {
				t.Errorf("stage 5 rendered, or without naming the stage: %v", err)
			}
		})
	}
}

func mustRead(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func objectOf(t *testing.T, file string) map[string]any {
	t.Helper()
	objs, err := render.ObjectsFromYAML(mustRead(t, file))
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: %v", file, err)
	}
	return objs[0]
}

// fileObject decodes one rendered file of b by its name in the bundle's
// directory.
func fileObject(t *testing.T, b *render.Bundle, base string) map[string]any {
	t.Helper()
	for _, f := range b.Files {
		if filepath.Base(f.Path) == base {
			var m map[string]any
			if err := sigsyaml.Unmarshal(f.Data, &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("no file %s in the bundle", base)
	return nil
}

func nested(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// TestVClusterKubeconfigReachesTheVirtualCluster: the vcluster HelmRelease
// exports a kubeconfig whose server is the vcluster Service's cluster DNS
// name (and in the API server's certificate), into the Secret the
// target's deliveries and read-back name.
func TestVClusterKubeconfigReachesTheVirtualCluster(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	b := renderStage(t, e, filepath.Join(fixturesDir, "valid", "agent-eval-dataset.yaml"), 0)
	const (
		tname = "support-agent-eval-sandbox"
		// The release and its hub namespace (#CloudName: the namespace
		// agents in it, cut to 31, and a hash).
		release = "support-agent-eval-sandbox-agen-532de73c"
		host    = release + "." + release + ".svc.cluster.local"
		secret  = tname + "-kubeconfig"
	)
	hr := fileObject(t, b, "helmrelease-"+tname+".yaml")
	if got := nested(hr, "spec", "values", "exportKubeConfig", "server"); got != "https://"+host {
		t.Errorf("exportKubeConfig.server = %v, want https://%s", got, host)
	}
	if got := nested(hr, "spec", "values", "exportKubeConfig", "secret", "name"); got != secret {
		t.Errorf("exportKubeConfig.secret.name = %v, want %s", got, secret)
	}
	if got := nested(hr, "spec", "values", "exportKubeConfig", "secret", "namespace"); got != "agents" {
		t.Errorf("exportKubeConfig.secret.namespace = %v, want the Experiment's namespace", got)
	}
	if got, ok := nested(hr, "spec", "values", "controlPlane", "proxy", "extraSANs").([]any); !ok || len(got) != 1 || got[0] != host {
		t.Errorf("controlPlane.proxy.extraSANs = %v, want [%s]", got, host)
	}
	if got := nested(hr, "spec", "releaseName"); got != release {
		t.Errorf("releaseName %v: the Service is named after the release", got)
	}
	if got := nested(hr, "spec", "targetNamespace"); got != release {
		t.Errorf("targetNamespace %v: the Service lives there", got)
	}
	ks := fileObject(t, b, "kustomization-"+tname+"-demo-services.yaml")
	if got := nested(ks, "spec", "kubeConfig", "secretRef", "name"); got != secret {
		t.Errorf("the delivery's kubeConfig Secret is %v, want the exported %s", got, secret)
	}
	if got := nested(ks, "spec", "kubeConfig", "secretRef", "key"); got != "config" {
		t.Errorf("the delivery's kubeConfig key is %v, want vcluster's config", got)
	}
	if len(b.ReadBack.Targets) != 1 || b.ReadBack.Targets[0].KubeconfigSecret != secret {
		t.Errorf("read-back kubeconfig Secret: %+v", b.ReadBack.Targets)
	}
}

// TestTestWorkflowMountsExperimentJSON: the TestWorkflow mounts the
// experiment.json ConfigMap at /data/experiment, where EXPERIMENT_JSON
// points.
func TestTestWorkflowMountsExperimentJSON(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, fixture := range []string{"agent-eval-dataset.yaml", "agent-eval-scenarios.yaml"} {
		b := renderStage(t, e, filepath.Join(fixturesDir, "valid", fixture), scribev1.StageWorkflowTemplates)
		var tw map[string]any
		for _, f := range b.Files {
			if strings.Contains(filepath.Base(f.Path), "testworkflow-") {
				if err := sigsyaml.Unmarshal(f.Data, &tw); err != nil {
					t.Fatal(err)
				}
			}
		}
		if tw == nil {
			t.Fatalf("%s: no TestWorkflow at stage 3", fixture)
		}
		mounts, _ := nested(tw, "spec", "container", "volumeMounts").([]any)
		volumes, _ := nested(tw, "spec", "pod", "volumes").([]any)
		if len(mounts) != 1 || len(volumes) != 1 {
			t.Fatalf("%s: volumeMounts %v, volumes %v", fixture, mounts, volumes)
		}
		m, v := mounts[0].(map[string]any), volumes[0].(map[string]any)
		if m["mountPath"] != "/data/experiment" || m["name"] != v["name"] {
			t.Errorf("%s: mount %v of volume %v", fixture, m, v)
		}
		cm, _ := nested(v, "configMap", "name").(string)
		data := fileObject(t, b, "configmap-"+cm+".yaml")
		if _, ok := nested(data, "data", "experiment.json").(string); !ok {
			t.Errorf("%s: the mounted ConfigMap %s has no experiment.json", fixture, cm)
		}
		var env string
		for _, x := range nested(tw, "spec", "container", "env").([]any) {
			if x.(map[string]any)["name"] == "EXPERIMENT_JSON" {
				env, _ = x.(map[string]any)["value"].(string)
			}
		}
		if env != "/data/experiment/experiment.json" {
			t.Errorf("%s: EXPERIMENT_JSON = %q", fixture, env)
		}
	}
}
