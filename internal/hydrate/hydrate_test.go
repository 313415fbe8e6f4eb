package hydrate

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/scribe-gitops/scribe/catalog"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: ${replicas:=1}
  template:
    metadata:
      labels: {tier: "${tier}"}
`

func files(m map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for p, data := range m {
		fsys[p] = &fstest.MapFile{Data: []byte(data)}
	}
	return fsys
}

func TestBuild(t *testing.T) {
	base := map[string]string{
		"app/kustomization.yaml": "resources: [deploy.yaml]\n",
		"app/deploy.yaml":        deployment,
		"other/secret.yaml":      "apiVersion: v1\nkind: Secret\nmetadata: {name: other}\n",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name    string
		files   map[string]string
		dir     string
		params  map[string]string
		ns      string
		limits  Limits
		check   func(t *testing.T, objs []map[string]any)
		wantErr string
		missing string // the param a *MissingParamError names
	}{
		{
			name: "params are substituted, a default fills an unset one", files: base, dir: "./app",
			params: map[string]string{"tier": "front"},
			check: func(t *testing.T, objs []map[string]any) {
				spec := objs[0]["spec"].(map[string]any)
				if spec["replicas"] != int64(1) {
					t.Errorf("replicas = %#v, want the default 1 as a number", spec["replicas"])
				}
				labels := spec["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)
				if labels["tier"] != "front" {
					t.Errorf("tier = %v, want front", labels["tier"])
				}
			},
		},
		{
			name: "a param overrides the default", files: base, dir: "./app",
			params: map[string]string{"tier": "x", "replicas": "3"},
			check: func(t *testing.T, objs []map[string]any) {
				if r := objs[0]["spec"].(map[string]any)["replicas"]; r != int64(3) {
					t.Errorf("replicas = %#v, want 3", r)
				}
			},
		},
		{
			name: "a missing param is refused, naming it", files: base, dir: "./app",
			wantErr: "${tier}", missing: "tier",
		},
		{
			name: "the namespace is set on namespaced objects", files: base, dir: "./app", ns: "team-a",
			params: map[string]string{"tier": "x"},
			check: func(t *testing.T, objs []map[string]any) {
				if ns := objs[0]["metadata"].(map[string]any)["namespace"]; ns != "team-a" {
					t.Errorf("namespace = %v, want team-a", ns)
				}
			},
		},
		{
			name: "substitution disabled by annotation keeps ${...}", dir: "./app",
			files: map[string]string{
				"app/kustomization.yaml": "resources: [cm.yaml]\n",
				"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n  annotations: {kustomize.toolkit.fluxcd.io/substitute: disabled}\ndata: {script: 'echo ${HOME}'}\n",
			},
			check: func(t *testing.T, objs []map[string]any) {
				if s := objs[0]["data"].(map[string]any)["script"]; s != "echo ${HOME}" {
					t.Errorf("script = %v, want it unchanged", s)
				}
			},
		},
		{
			name: "a directory without kustomization.yaml lists its manifests", dir: "./plain",
			files: map[string]string{"plain/b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n", "plain/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"},
			check: func(t *testing.T, objs []map[string]any) {
				if len(objs) != 2 || objs[0]["metadata"].(map[string]any)["name"] != "a" {
					t.Errorf("objects = %v, want a then b", objs)
				}
			},
		},
		{name: "an entry path above the catalog is refused", files: base, dir: "./../app", wantErr: "leaves the catalog"},
		{name: "an absolute entry path is refused", files: base, dir: "/app", wantErr: "absolute"},
		{
			name: "a resource above the entry's directory is refused", dir: "./app",
			files:   with(map[string]string{"app/kustomization.yaml": "resources: [deploy.yaml, ../other/secret.yaml]\n"}),
			wantErr: `resources[1] "../other/secret.yaml" leaves the entry's directory`,
		},
		{
			name: "a remote base is refused", dir: "./app",
			files:   with(map[string]string{"app/kustomization.yaml": "resources:\n- https://github.com/org/repo//deploy?ref=v1\n"}),
			wantErr: "no remote bases",
		},
		{
			name: "a git base without a scheme is refused", dir: "./app",
			files:   with(map[string]string{"app/kustomization.yaml": "resources: [github.com/org/repo/deploy]\n"}),
			wantErr: "is not a file or directory of the entry",
		},
		{
			name: "a generator file above the directory is refused", dir: "./app",
			files:   with(map[string]string{"app/kustomization.yaml": "configMapGenerator: [{name: x, files: [k=../other/secret.yaml]}]\n"}),
			wantErr: "configMapGenerator[0].files[0]",
		},
		{
			name: "a patch above the directory is refused", dir: "./app",
			files:   with(map[string]string{"app/kustomization.yaml": "resources: [deploy.yaml]\npatches: [{path: ../other/secret.yaml}]\n"}),
			wantErr: `patches[0].path "../other/secret.yaml" leaves the entry's directory`,
		},
		{
			name: "a nested base inside the directory is built", dir: "./app",
			files:  with(map[string]string{"app/kustomization.yaml": "resources: [base]\nnamePrefix: x-\n", "app/base/kustomization.yaml": "resources: [../deploy.yaml]\n"}),
			params: map[string]string{"tier": "x"},
			check: func(t *testing.T, objs []map[string]any) {
				if n := objs[0]["metadata"].(map[string]any)["name"]; n != "x-web" {
					t.Errorf("name = %v, want x-web", n)
				}
			},
		},
		{
			name: "helm charts are refused", dir: "./app",
			files:   with(map[string]string{"app/kustomization.yaml": "helmCharts: [{name: x, repo: https://charts.example}]\n"}),
			wantErr: "helmCharts",
		},
		{name: "a missing directory is refused", files: base, dir: "./nope", wantErr: "not a directory"},
		{
			name: "the input size is bounded", files: base, dir: "./app", params: map[string]string{"tier": "x"},
			limits: Limits{MaxInputBytes: 64}, wantErr: "exceed",
		},
		{
			name: "the output size is bounded", files: base, dir: "./app", params: map[string]string{"tier": strings.Repeat("x", 400)},
			limits: Limits{MaxOutputBytes: 256}, wantErr: "exceed",
		},
		{
			name: "the number of objects is bounded", files: with(map[string]string{"app/kustomization.yaml": "resources: [deploy.yaml, more.yaml]\n", "app/more.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m}\n"}),
			dir: "./app", params: map[string]string{"tier": "x"}, limits: Limits{MaxObjects: 1}, wantErr: "more than 1",
		},
		{name: "a param name Flux cannot substitute is refused", files: base, dir: "./app", params: map[string]string{"a-b": "x"}, wantErr: "cannot be substituted"},
		{
			name: "invalid YAML after substitution is refused", files: base, dir: "./app",
			params: map[string]string{"tier": "x", "replicas": "[1"}, wantErr: "after substituting params",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Build(Request{FS: files(tt.files), Dir: tt.dir, Params: tt.params, Namespace: tt.ns, Limits: tt.limits})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				var mp *MissingParamError
				if tt.missing != "" && (!errors.As(err, &mp) || mp.Param != tt.missing) {
					t.Fatalf("err = %#v, want a *MissingParamError naming %q", err, tt.missing)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, objs)
		})
	}
}

// TestBuildShippedCatalog hydrates every kustomize entry of the catalog
// Scribe ships with the params its built-in entries take.
func TestBuildShippedCatalog(t *testing.T) {
	tests := []struct {
		dir    string
		ns     string
		params map[string]string
		want   int
	}{
		{"./apps/demo-services", "demo", map[string]string{"replicas": "2"}, 6},
		{"./config/otel-collector", "observability", map[string]string{"tenant": "t", "transport": "direct", "endpoint": "https://otlp.hub.example.com:4317", "insecure": "false"}, 4},
		{"./workflows/k6-http-loadgen", "experiments", nil, 0},
		{"./workflows/gateway-validation", "experiments", nil, 0},
		{"./workflows/agent-eval", "testkube", nil, 5},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			objs, err := Build(Request{FS: catalog.FS, Dir: tt.dir, Params: tt.params, Namespace: tt.ns})
			if err != nil {
				t.Fatal(err)
			}
			if tt.want > 0 && len(objs) != tt.want {
				t.Errorf("%d objects, want %d", len(objs), tt.want)
			}
			for _, o := range objs {
				if strings.Contains(mustString(o), "${") {
					t.Errorf("%v keeps a ${...}", o["metadata"])
				}
				if o["kind"] == "Namespace" {
					continue
				}
				md := o["metadata"].(map[string]any)
				if md["namespace"] != tt.ns && !clusterScoped(o["kind"]) {
					t.Errorf("%s %s in namespace %v, want %s", o["kind"], md["name"], md["namespace"], tt.ns)
				}
			}
		})
	}
}

func clusterScoped(kind any) bool {
	return kind == "ClusterRole" || kind == "ClusterRoleBinding"
}

func mustString(o map[string]any) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string:
			b.WriteString(x)
		}
	}
	walk(o)
	return b.String()
}

// TestKeyFollowsWhatBuildReads: the key changes with the entry's files,
// its params and its namespace, and only with them.
func TestKeyFollowsWhatBuildReads(t *testing.T) {
	base := map[string]string{"app/kustomization.yaml": "resources: [deploy.yaml]\n", "app/deploy.yaml": deployment, "other/x.yaml": "a: 1\n"}
	req := func(fm map[string]string, params map[string]string, ns string) Request {
		return Request{FS: files(fm), Dir: "./app", Params: params, Namespace: ns}
	}
	key := func(r Request) string {
		k, err := Key(r)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	p := map[string]string{"tier": "x"}
	k0 := key(req(base, p, "a"))
	other := map[string]string{}
	for k, v := range base {
		other[k] = v
	}
	other["other/x.yaml"] = "a: 2\n"
	changed := map[string]string{}
	for k, v := range base {
		changed[k] = v
	}
	changed["app/deploy.yaml"] = deployment + "# changed\n"
	for _, tt := range []struct {
		name string
		r    Request
		same bool
	}{
		{"the same request", req(base, map[string]string{"tier": "x"}, "a"), true},
		{"a file outside the entry changed", req(other, p, "a"), true},
		{"a file of the entry changed", req(changed, p, "a"), false},
		{"another param value", req(base, map[string]string{"tier": "y"}, "a"), false},
		{"another namespace", req(base, p, "b"), false},
	} {
		if got := key(tt.r) == k0; got != tt.same {
			t.Errorf("%s: same key %v, want %v", tt.name, got, tt.same)
		}
	}
}
