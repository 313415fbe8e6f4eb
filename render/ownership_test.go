package render_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/render"
)

func TestOwnedSuffix(t *testing.T) {
	tests := []struct {
		name, namespace, experiment string
		want                        string
	}{
		{"the Experiment's name and a hash of namespace/name", "experiments", "gateway-tutorial", "-gateway-tutorial-69627315b2"},
		{"a name cut at 20 characters, the hash over the whole", "team-a", "a-very-long-experiment-name-indeed", "-a-very-long-experime-" + hash10("team-a/a-very-long-experiment-name-indeed")},
		{"no dash left where the cut falls", "team-a", "experiment-number-0-of-many", "-experiment-number-0-" + hash10("team-a/experiment-number-0-of-many")},
		{"dots become dashes (a Service's name is a DNS label)", "team-a", "web.v2", "-web-v2-" + hash10("team-a/web.v2")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := render.OwnedSuffix(tc.namespace, tc.experiment)
			if got != tc.want {
				t.Errorf("OwnedSuffix(%q, %q) = %q, want %q", tc.namespace, tc.experiment, got, tc.want)
			}
			if len(got) > render.MaxOwnedSuffix {
				t.Errorf("%q is %d characters, more than %d", got, len(got), render.MaxOwnedSuffix)
			}
		})
	}
	apart := [][2][2]string{
		{{"team-a", "web"}, {"team-b", "web"}},                                       // one name, two namespaces
		{{"team", "a-web"}, {"team-a", "web"}},                                       // one joined string
		{{"t", "experiment-number-0-of-many"}, {"t", "experiment-number-0-of-more"}}, // one cut name
	}
	for _, p := range apart {
		if a, b := render.OwnedSuffix(p[0][0], p[0][1]), render.OwnedSuffix(p[1][0], p[1][1]); a == b {
			t.Errorf("%v and %v have the same suffix %q", p[0], p[1], a)
		}
	}
}

// hash10 is the first 10 hex digits of sha256(s), as OwnedSuffix hashes.
func hash10(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:10]
}

// deliveredObjects renders obj and returns the objects its tree delivers,
// as kind/namespace/name, each with its document: the rendered objects and
// the hydrated components' (not the kustomization.yaml files or
// .scribe.json).
func deliveredObjects(t *testing.T, e *render.Engine, obj map[string]any, pub render.Publish) (map[string]map[string]any, error) {
	t.Helper()
	b, err := e.Render(context.Background(), render.Input{Object: obj, Publish: pub, Resolved: testResolved})
	if err != nil {
		return nil, err
	}
	return bundleObjects(t, b), nil
}

// bundleObjects decodes the objects of a bundle's tree, as deliveredObjects
// returns them.
func bundleObjects(t *testing.T, b *render.Bundle) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, f := range b.Files {
		base := filepath.Base(f.Path)
		if base == "kustomization.yaml" || !strings.HasSuffix(base, ".yaml") {
			continue
		}
		for _, d := range strings.Split(string(f.Data), "\n---\n") {
			m := map[string]any{}
			if err := yaml.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
			if len(m) == 0 {
				continue
			}
			out[str(m, "kind")+"/"+str(m, "metadata", "namespace")+"/"+str(m, "metadata", "name")] = m
		}
	}
	return out
}

// TestTwoExperimentsInOneNamespaceDeliverDisjointObjects renders every
// Experiment fixture twice, under two names in one namespace, with Flux and
// with Argo CD: no object of one tree is an object of the other but the
// shared cluster-scoped ones (the catalog's Namespaces), which both trees
// mark never to be pruned, so deleting one Experiment leaves everything
// the other delivered.
func TestTwoExperimentsInOneNamespaceDeliverDisjointObjects(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	appliers := map[string]render.Publish{"flux": render.DefaultPublish(), "argocd": argoPublish()}
	for _, file := range experimentFixtures(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for applier, pub := range appliers {
			t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml")+"/"+applier, func(t *testing.T) {
				trees := make([]map[string]map[string]any, 2)
				for i, name := range []string{"first", "second"} {
					objs, err := render.ObjectsFromYAML(data)
					if err != nil || len(objs) != 1 {
						t.Fatalf("%s: want one object, got %d (%v)", file, len(objs), err)
					}
					objs[0]["metadata"].(map[string]any)["name"] = name
					if trees[i], err = deliveredObjects(t, e, objs[0], pub); err != nil {
						if i == 0 && applier == "argocd" {
							// (agent-eval-scenarios: its Helm component's
							// Argo CD project does not render, whatever
							// the Experiment's name: not ownership's.)
							t.Skipf("the fixture does not render with Argo CD: %v", err)
						}
						t.Fatal(err)
					}
				}
				for i, tree := range trees {
					for _, missing := range danglingReferences(tree) {
						t.Errorf("tree %d: %s", i, missing)
					}
				}
				var shared []string
				for id, doc := range trees[0] {
					if _, both := trees[1][id]; !both {
						continue
					}
					shared = append(shared, id)
					if str(doc, "kind") != "Namespace" {
						t.Errorf("both Experiments deliver %s", id)
						continue
					}
					for i, tree := range trees {
						ann, _ := tree[id]["metadata"].(map[string]any)["annotations"].(map[string]any)
						if ann["kustomize.toolkit.fluxcd.io/prune"] != "disabled" || ann["argocd.argoproj.io/sync-options"] != "Prune=false,Delete=false" {
							t.Errorf("tree %d: the shared %s is not marked never pruned: %v", i, id, ann)
						}
					}
				}
				sort.Strings(shared)
				t.Logf("%d and %d objects, shared: %v", len(trees[0]), len(trees[1]), shared)
				if len(trees[0]) < 5 {
					t.Fatalf("only %d objects rendered: %v", len(trees[0]), trees[0])
				}
			})
		}
	}
}

// danglingReferences lists the references between a tree's objects that
// name no object of the tree: a Workflow's WorkflowTemplate, a
// WorkflowTemplate's ServiceAccount, a RoleBinding's Role and
// ServiceAccounts, a TestWorkflow's TestWorkflowTemplates.
func danglingReferences(tree map[string]map[string]any) []string {
	var out []string
	ref := func(from map[string]any, kind, ns, name string) {
		if name == "" {
			return
		}
		if _, ok := tree[kind+"/"+ns+"/"+name]; !ok {
			out = append(out, fmt.Sprintf("%s %s/%s names %s %s/%s, which the tree does not deliver",
				str(from, "kind"), str(from, "metadata", "namespace"), str(from, "metadata", "name"), kind, ns, name))
		}
	}
	for _, o := range tree {
		ns := str(o, "metadata", "namespace")
		switch str(o, "kind") {
		case "Workflow":
			ref(o, "WorkflowTemplate", ns, str(o, "spec", "workflowTemplateRef", "name"))
		case "WorkflowTemplate":
			ref(o, "ServiceAccount", ns, str(o, "spec", "serviceAccountName"))
		case "RoleBinding":
			ref(o, str(o, "roleRef", "kind"), ns, str(o, "roleRef", "name"))
			subjects, _ := o["subjects"].([]any)
			for _, sub := range subjects {
				if m, _ := sub.(map[string]any); str(m, "kind") == "ServiceAccount" {
					ref(o, "ServiceAccount", str(m, "namespace"), str(m, "name"))
				}
			}
		case "TestWorkflow":
			steps, _ := o["spec"].(map[string]any)["steps"].([]any)
			for _, st := range steps {
				m, _ := st.(map[string]any)
				ref(o, "TestWorkflowTemplate", ns, str(m, "template", "name"))
			}
		}
	}
	sort.Strings(out)
	return out
}
