package catalog_test

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/scribe-gitops/scribe/catalog"
)

// entry is a built-in catalog entry, as the tests need it.
type entry struct {
	name, kind, namespace, workflowTemplate string
	source                                  map[string]any
	// params are the entry's #Params with their defaults and, for
	// required ones, an example value: what Flux substitutes.
	params map[string]string
}

// examples are values for the required params of built-in entries.
var examples = map[string]string{
	"targetUrl": "http://demo-http.demo.svc.cluster.local/api",
	"tenant":    "lab",
	"transport": "direct",
	"endpoint":  "https://otlp.hub.example.com:4317",
	"insecure":  "false",
}

// builtinEntries evaluates the built-in entries from catalog.FS.
func builtinEntries(t *testing.T) []entry {
	t.Helper()
	src, err := fs.ReadFile(catalog.FS, path.Join(catalog.BuiltinDir, "entries.cue"))
	if err != nil {
		t.Fatal(err)
	}
	v := cuecontext.New().CompileBytes(src)
	if err := v.Err(); err != nil {
		t.Fatal(err)
	}
	it, err := v.LookupPath(cue.ParsePath("entries")).Fields()
	if err != nil {
		t.Fatal(err)
	}
	var out []entry
	for it.Next() {
		e := entry{name: it.Selector().Unquoted(), params: map[string]string{}}
		ev := it.Value()
		e.kind, _ = ev.LookupPath(cue.ParsePath("kind")).String()
		e.namespace, _ = ev.LookupPath(cue.ParsePath("namespace")).String()
		e.workflowTemplate, _ = ev.LookupPath(cue.ParsePath("workflowTemplate")).String()
		if err := ev.LookupPath(cue.ParsePath("source")).Decode(&e.source); err != nil {
			t.Fatalf("entry %s: source: %v", e.name, err)
		}
		ps, err := ev.LookupPath(cue.MakePath(cue.Def("#Params"))).Fields(cue.Optional(true))
		if err != nil {
			t.Fatalf("entry %s: #Params: %v", e.name, err)
		}
		for ps.Next() {
			k := ps.Selector().Unquoted()
			if d, ok := ps.Value().Default(); ok {
				if s, err := d.String(); err == nil {
					e.params[k] = s
					continue
				}
			}
			if x, ok := examples[k]; ok {
				e.params[k] = x
			}
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		t.Fatal("no built-in entries")
	}
	return out
}

// build runs kustomize on the entry's directory in catalog.FS, as Flux's
// kustomize-controller does before it substitutes the params.
func build(t *testing.T, dir string) resmap.ResMap {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(catalog.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(catalog.FS, p)
		if err != nil {
			return err
		}
		return mem.WriteFile("/"+p, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/"+strings.TrimPrefix(dir, "./"))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return rm
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:=([^}]*))?\}`)

// substitute replaces ${name} and ${name:=default} as Flux's postBuild
// substitution does; a variable neither given nor defaulted is an error
// (the entry's manifests would get an empty value).
func substitute(yaml string, vars map[string]string) (string, error) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(yaml, func(m string) string {
		g := varRef.FindStringSubmatch(m)
		if v, ok := vars[g[1]]; ok {
			return v
		}
		if g[2] != "" {
			return g[3]
		}
		missing = append(missing, g[1])
		return m
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("variables not among the entry's params: %v", missing)
	}
	return out, nil
}

// TestBuiltinEntriesResolveToShippedManifests: every built-in entry is
// either a public Helm chart or a path in this directory (never a Git or
// OCI URL of its own), that path builds with kustomize, only uses the
// entry's params as Flux variables, and a workflow entry's directory holds
// the templates it names.
func TestBuiltinEntriesResolveToShippedManifests(t *testing.T) {
	shipped := map[string]bool{}
	for _, e := range builtinEntries(t) {
		t.Run(e.name, func(t *testing.T) {
			switch e.source["type"] {
			case "helm":
				if r, _ := e.source["repository"].(string); !strings.HasPrefix(r, "https://") && !strings.HasPrefix(r, "oci://") {
					t.Fatalf("helm repository %q", r)
				}
				return
			case "catalog":
			default:
				t.Fatalf("source type %v: a built-in entry's manifests ship in catalog/ (type catalog) or come from a public Helm chart", e.source["type"])
			}
			dir, _ := e.source["path"].(string)
			if _, err := fs.Stat(catalog.FS, path.Join(strings.TrimPrefix(dir, "./"), "kustomization.yaml")); err != nil {
				t.Fatalf("path %s: %v", dir, err)
			}
			shipped[path.Clean(dir)] = true
			rm := build(t, dir)
			y, err := rm.AsYaml()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := substitute(string(y), e.params); err != nil {
				t.Fatalf("%s: %v", dir, err)
			}
			if e.kind != "workflow" {
				return
			}
			var got []string
			for _, r := range rm.Resources() {
				if k := r.GetKind(); k == "WorkflowTemplate" || k == "TestWorkflowTemplate" {
					got = append(got, k+"/"+r.GetName())
				}
			}
			sort.Strings(got)
			want := []string{"WorkflowTemplate/" + e.workflowTemplate}
			if e.name == "agent-eval" {
				// The TestWorkflow Scribe renders runs agent-eval-<phase>.
				want = nil
				for _, p := range []string{"evaluate", "publish", "run", "setup", "visualize"} {
					want = append(want, "TestWorkflowTemplate/agent-eval-"+p)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s holds %v, want %v", dir, got, want)
			}
		})
	}
	// Nothing in apps/, config/ or workflows/ is left without an entry.
	for _, top := range []string{"apps", "config", "workflows"} {
		dirs, err := fs.ReadDir(catalog.FS, top)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if p := top + "/" + d.Name(); !shipped[p] {
				t.Errorf("%s is shipped but no built-in entry delivers it", p)
			}
		}
	}
}
