package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

func jsonObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAPIRulesRefuseWhatTheAPIServerRefuses(t *testing.T) {
	deployment := func(podSpec string) string {
		return `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web-v1","namespace":"demo"},
			"spec":{"template":{"metadata":{"labels":{"app":"web"}},"spec":` + podSpec + `}}}`
	}
	cases := []struct {
		name       string
		apiVersion string
		kind       string
		object     string
		size       int
		want       []string // substrings of the violations, in order; none: valid
	}{
		{"a valid Deployment passes", "apps/v1", "Deployment",
			deployment(`{"containers":[{"name":"app","env":[{"name":"a b.c"}],"ports":[{"name":"http"}]}],"nodeSelector":{"kubernetes.io/arch":"amd64"},"volumes":[{"name":"tmp"}]}`), 0, nil},
		{"object name that is no DNS-1123 subdomain", "apps/v1", "Deployment",
			`{"metadata":{"name":"Web_1","namespace":"demo"}}`, 0, []string{`metadata.name: Invalid value: "Web_1"`}},
		{"Service name that is no DNS-1035 label", "v1", "Service",
			`{"metadata":{"name":"1web","namespace":"demo"},"spec":{"ports":[{"name":"HTTP"}]}}`, 0, []string{`metadata.name: Invalid value: "1web"`, `spec.ports[0].name: Invalid value: "HTTP"`}},
		{"a dotted name is fine for a ConfigMap but not a Service", "v1", "ConfigMap",
			`{"metadata":{"name":"web.v1","namespace":"demo"}}`, 0, nil},
		{"RBAC names are path segments", "rbac.authorization.k8s.io/v1", "Role",
			`{"metadata":{"name":"a/b","namespace":"demo"}}`, 0, []string{`metadata.name: Invalid value: "a/b": may not contain '/'`}},
		{"a Flux Kustomization's name is a label value (Flux labels what it applies with it)", "kustomize.toolkit.fluxcd.io/v1", "Kustomization",
			`{"metadata":{"name":"` + strings.Repeat("k", 64) + `","namespace":"demo"}}`, 0,
			[]string{`metadata.name: Invalid value: "` + strings.Repeat("k", 64) + `": must be no more than 63 bytes (a label value: Flux labels every object a Kustomization applies with its name)`}},
		{"a 63-character Kustomization name is fine, and a longer name for other kinds", "kustomize.toolkit.fluxcd.io/v1", "Kustomization",
			`{"metadata":{"name":"` + strings.Repeat("k", 63) + `","namespace":"demo"}}`, 0, nil},
		{"a HelmRelease's name too (helm-controller labels the release's objects with it)", "helm.toolkit.fluxcd.io/v2", "HelmRelease",
			`{"metadata":{"name":"` + strings.Repeat("h", 64) + `","namespace":"demo"}}`, 0,
			[]string{`metadata.name: Invalid value: "` + strings.Repeat("h", 64) + `": must be no more than 63 bytes (a label value: Flux labels every object a HelmRelease applies with its name)`}},
		{"an Argo Workflow's name too (Argo Workflows labels its pods with it)", "argoproj.io/v1alpha1", "Workflow",
			`{"metadata":{"name":"` + strings.Repeat("w", 64) + `","namespace":"demo"}}`, 0,
			[]string{`metadata.name: Invalid value: "` + strings.Repeat("w", 64) + `": must be no more than 63 bytes (a label value: Argo Workflows labels every pod of a Workflow with its name)`}},
		{"a Cluster API Cluster's name too (Cluster API labels the cluster's objects with it)", "cluster.x-k8s.io/v1beta2", "Cluster",
			`{"metadata":{"name":"` + strings.Repeat("c", 64) + `","namespace":"demo"}}`, 0,
			[]string{`metadata.name: Invalid value: "` + strings.Repeat("c", 64) + `": must be no more than 63 bytes (a label value: Cluster API labels every object of a Cluster with its name)`}},
		{"a long GitRepository name is fine", "source.toolkit.fluxcd.io/v1", "GitRepository",
			`{"metadata":{"name":"` + strings.Repeat("k", 64) + `","namespace":"demo"}}`, 0, nil},
		{"missing name", "v1", "ConfigMap", `{"metadata":{"namespace":"demo"}}`, 0, []string{"metadata.name: Required value"}},
		{"namespace that is no DNS label", "v1", "ConfigMap",
			`{"metadata":{"name":"c","namespace":"a.b"}}`, 0, []string{`metadata.namespace: Invalid value: "a.b"`}},
		{"label key and value, annotation key", "v1", "ConfigMap",
			`{"metadata":{"name":"c","labels":{"a/b/c":"x","ok":"not ok"},"annotations":{"-x":"1"}}}`, 0,
			[]string{`metadata.labels: Invalid value: "a/b/c"`, `metadata.labels: Invalid value: "not ok"`, `metadata.annotations: Invalid value: "-x"`}},
		{"ConfigMap keys", "v1", "ConfigMap",
			`{"metadata":{"name":"c"},"data":{"":"e","../../etc/passwd":"x","a b":"y","ok":"z"},"binaryData":{"ok":"eA=="}}`, 0,
			[]string{`data[]: Invalid value: ""`, `data[../../etc/passwd]: Invalid value: "../../etc/passwd": a valid config key`, `data[../../etc/passwd]: Invalid value: "../../etc/passwd": must not start with '..'`, `data[a b]: Invalid value`, `data[ok]: Invalid value: "ok": duplicate of key present in binaryData`}},
		{"ConfigMap over 1 MiB of data and binaryData", "v1", "ConfigMap",
			`{"metadata":{"name":"c"},"data":{"a":"` + strings.Repeat("x", 1<<20-2) + `"},"binaryData":{"b":"eHh4"}}`, 0,
			[]string{`data: Too long: data and binaryData hold 1048577 bytes, over the 1048576 bytes of a ConfigMap (the largest entry is "a")`}},
		{"ConfigMap of exactly 1 MiB", "v1", "ConfigMap",
			`{"metadata":{"name":"c"},"data":{"a":"` + strings.Repeat("x", 1<<20-2) + `"},"binaryData":{"b":"eHg="}}`, 0, nil},
		{"object over 1.5 MiB", "v1", "ConfigMap", `{"metadata":{"name":"c"}}`, 3<<19 + 1, []string{`<object>: Too long: the object is 1572865 bytes as JSON`}},
		{"env names: '=' and empty (the relaxed rule of 1.36)", "apps/v1", "Deployment",
			deployment(`{"containers":[{"name":"app","env":[{"name":"A=B"},{"name":""},{"name":"ok"}],"envFrom":[{"prefix":"P="}]}]}`), 0,
			[]string{`containers[0].env[0].name: Invalid value: "A=B"`, `containers[0].env[1].name: Invalid value: "": environment variable name must be non-empty`, `containers[0].envFrom[0].prefix: Invalid value: "P="`}},
		{"env name with a control character", "apps/v1", "Deployment",
			deployment(`{"containers":[{"name":"app","env":[{"name":"A\nB"}]}]}`), 0, []string{`env[0].name: Invalid value: "A\nB"`}},
		{"nodeSelector key and value", "apps/v1", "Deployment",
			deployment(`{"containers":[{"name":"app"}],"nodeSelector":{"node pool":"a","x":"b c"}}`), 0,
			[]string{`spec.template.spec.nodeSelector: Invalid value: "b c"`, `spec.template.spec.nodeSelector: Invalid value: "node pool"`}},
		{"container, port and volume names", "apps/v1", "Deployment",
			deployment(`{"initContainers":[{"name":"app"}],"containers":[{"name":"app","ports":[{"name":"a-very-long-port-name"}]},{"name":"Side_car"}],"volumes":[{"name":"a.b"}]}`), 0,
			[]string{`spec.template.spec.volumes[0].name: Invalid value: "a.b"`, `spec.template.spec.containers[0].name: Duplicate value: "app"`, `containers[0].ports[0].name: Invalid value: "a-very-long-port-name"`, `containers[1].name: Invalid value: "Side_car"`}},
		{"pod template labels", "apps/v1", "Deployment",
			`{"metadata":{"name":"d"},"spec":{"template":{"metadata":{"labels":{"a":"-x"}},"spec":{"containers":[{"name":"c"}]}}}}`, 0,
			[]string{`spec.template.metadata.labels: Invalid value: "-x"`}},
		{"a CronJob's pod template", "batch/v1", "CronJob",
			`{"metadata":{"name":"j"},"spec":{"jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"C"}]}}}}}}`, 0,
			[]string{`spec.jobTemplate.spec.template.spec.containers[0].name: Invalid value: "C"`}},
		{"a Pod is its own template", "v1", "Pod",
			`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","env":[{"name":"="}]}]}}`, 0,
			[]string{`spec.containers[0].env[0].name: Invalid value: "="`}},
		{"custom resources are not pod templates", "example.com/v1", "Thing",
			`{"metadata":{"name":"t"},"spec":{"template":{"spec":{"containers":[{"name":"C"}]}}}}`, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := jsonObject(t, tc.object)
			got := apiRules(tc.apiVersion, tc.kind, obj, tc.size)
			if len(got) != len(tc.want) {
				var msgs []string
				for _, v := range got {
					msgs = append(msgs, v.err.Error())
				}
				t.Fatalf("got %d violations, want %d:\n%s", len(got), len(tc.want), strings.Join(msgs, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i].err.Error(), w) {
					t.Errorf("violation %d = %s\nwant it to contain %s", i, got[i].err.Error(), w)
				}
			}
		})
	}
}

func TestLocateInCRNamesTheFieldARenderedValueCameFrom(t *testing.T) {
	cr := jsonObject(t, `{"metadata":{"name":"1web","labels":{"team":"shop"}},
		"spec":{"versions":[{"name":"v1","config":{"../x":"y","":"e"},"env":[{"name":"A=B"}]}],
		"scheduling":{"nodeSelector":{"kubernetes.io/arch":"a b"}}}}`)
	cases := []struct {
		value  string
		prefix bool
		want   string
	}{
		{"../x", false, "spec.versions[0].config[../x]"},
		{"", false, "spec.versions[0].config[]"},
		{"A=B", false, "spec.versions[0].env[0].name"},
		{"a b", false, "spec.scheduling.nodeSelector[kubernetes.io/arch]"},
		{"shop", false, "metadata.labels.team"},
		{"1web-v1", false, ""},
		{"1web-v1", true, "metadata.name"},
		{"zz-1web", true, ""},
		{"v1-x", true, "spec.versions[0].name"},
		{"nowhere", true, ""},
	}
	for _, tc := range cases {
		if got := locateInCR(cr, tc.value, tc.prefix); got != tc.want {
			t.Errorf("locateInCR(%q, prefix=%v) = %q, want %q", tc.value, tc.prefix, got, tc.want)
		}
	}
	if got := locateInCR(nil, "x", true); got != "" {
		t.Errorf("without a CR: %q", got)
	}
}

func TestValidateCRMetadataIsTheAPIServers(t *testing.T) {
	cases := []struct {
		name string
		md   string
		want []string
	}{
		{"valid", `{"name":"web.v1","namespace":"demo","labels":{"a.b/c":"d"},"annotations":{"x":"any value\nat all"}}`, nil},
		{"newline and document separator in the name", `{"name":"x\n---\nkind: ClusterRoleBinding","namespace":"demo"}`,
			[]string{`metadata.name: Invalid value: "x\n---\nkind: ClusterRoleBinding": a lowercase RFC 1123 subdomain`}},
		{"path in the name", `{"name":"../etc","namespace":"demo"}`, []string{`metadata.name: Invalid value: "../etc"`}},
		{"name too long", `{"name":"` + strings.Repeat("a", 254) + `","namespace":"demo"}`, []string{"metadata.name: Invalid value", "must be no more than 253 characters"}},
		{"namespace is a label", `{"name":"w","namespace":"a.b"}`, []string{`metadata.namespace: Invalid value: "a.b"`}},
		{"labels and annotations", `{"name":"w","namespace":"d","labels":{"a":"b c"},"annotations":{"/x":"1"}}`,
			[]string{`metadata.labels: Invalid value: "b c"`, `metadata.annotations: Invalid value: "/x"`}},
		{"a label that is not a string", `{"name":"w","namespace":"d","labels":{"a":1}}`, []string{"metadata: Invalid value:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			md := jsonObject(t, tc.md)
			for k, v := range md {
				md[k] = deepCopyJSON(v)
			}
			var msgs []string
			for _, e := range validateCRMetadata(md, true) {
				msgs = append(msgs, e.Error())
			}
			got := strings.Join(msgs, "\n")
			if len(tc.want) == 0 && got != "" {
				t.Fatalf("want valid, got:\n%s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("got:\n%s\nwant it to contain %s", got, w)
				}
			}
		})
	}
}

func TestDependsCyclesAreNamed(t *testing.T) {
	exp := func(targets ...scribev1.Target) *scribev1.Experiment {
		return &scribev1.Experiment{Spec: scribev1.ExperimentSpec{Targets: targets}}
	}
	tgt := func(name string, deps ...string) scribev1.Target {
		return scribev1.Target{Name: name, Depends: deps}
	}
	cases := []struct {
		name string
		x    *scribev1.Experiment
		want []string
	}{
		{"no depends", exp(tgt("a"), tgt("b")), nil},
		{"a chain and a diamond", exp(tgt("a", "b", "c"), tgt("b", "d"), tgt("c", "d"), tgt("d")), nil},
		{"two targets", exp(tgt("a", "b"), tgt("b", "a")), []string{"spec.targets: depends cycle a -> b -> a"}},
		{"three targets, entered from outside", exp(tgt("x", "a"), tgt("a", "b"), tgt("b", "c"), tgt("c", "a")), []string{"spec.targets: depends cycle a -> b -> c -> a"}},
		{"two separate cycles", exp(tgt("a", "b"), tgt("b", "a"), tgt("c", "d"), tgt("d", "c")),
			[]string{"spec.targets: depends cycle a -> b -> a", "spec.targets: depends cycle c -> d -> c"}},
		{"an unknown target is the CEL rule's to report", exp(tgt("a", "zzz")), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range dependsCycles(tc.x) {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestYAMLStreamWritesWhatMarshalWrites: the sync file's documents come out
// of one encoder byte for byte as sigs.k8s.io/yaml.Marshal writes each,
// `---` between them, whatever the strings hold.
func TestYAMLStreamWritesWhatMarshalWrites(t *testing.T) {
	a := jsonObject(t, `{"kind":"GitRepository","metadata":{"name":"x"},"spec":{"interval":"1m","n":3,"f":1.5,"s":"line1\n---\nkind: Secret","list":[{"a":1},"b"],"empty":{},"e":"",
		"numbers":[-7,0,-0,1.0,1e3,1e-7,0.1,2.5e+20,9223372036854775807,9223372036854775808,18446744073709551615,-9223372036854775808],
		"strings":["80","true","null","~","a: b","<&>","é\u00e9","- x","10:30","0x1F","1_000"]}}`)
	b := jsonObject(t, `{"kind":"Kustomization","spec":{"path":"./demo","prune":true,"n":null,"q":"'quoted' \"x\""}}`)
	got, err := yamlStream(a, b)
	if err != nil {
		t.Fatal(err)
	}
	ya, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	yb, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(ya, "---\n"...), yb...)
	if !bytes.Equal(got, want) {
		t.Fatalf("stream:\n%s\nwant:\n%s", got, want)
	}
	docs, err := ObjectsFromYAML(got)
	if err != nil || len(docs) != 2 {
		t.Fatalf("the stream reads back as %d documents (%v)", len(docs), err)
	}
}

func TestObjectsFromYAMLRefusesDuplicateKeys(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string // "" means no error
	}{
		{"distinct keys", "a: 1\nb: 2\n", ""},
		{"a duplicate key", "a: 1\nmetadata:\n  name: x\n  name: y\n", `document 1 (from line 1): yaml: unmarshal errors:
  line 4: key "name" already set in map`},
		{"in the second document", "a: 1\n---\n# two\nb: 1\nb: 2\n", `document 2 (from line 3): yaml: unmarshal errors:
  line 3: key "b" already set in map`},
		{"the same key in two documents", "a: 1\n---\na: 2\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ObjectsFromYAML([]byte(tc.in))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("error %v, want %s", err, tc.want)
			}
		})
	}
}

func TestDuplicateComponentsOfATargetAreNamed(t *testing.T) {
	target := func(name string, cs ...scribev1.Component) scribev1.Target {
		return scribev1.Target{Name: name, Components: cs}
	}
	app := func(n string) scribev1.Component { return scribev1.Component{App: n} }
	wf := func(n string) scribev1.Component { return scribev1.Component{Workflow: n} }
	cases := []struct {
		name    string
		targets []scribev1.Target
		want    []string
	}{
		{"distinct", []scribev1.Target{target("a", app("x"), app("y"), wf("x"))}, nil},
		{"the same component in two targets", []scribev1.Target{target("a", app("x")), target("b", app("x"))}, nil},
		{"twice in one target", []scribev1.Target{target("a", app("x")), target("b", app("y"), wf("z"), app("y"), app("y"))},
			[]string{`spec.targets[1].components[2].app: Duplicate value: "y"`, `spec.targets[1].components[3].app: Duplicate value: "y"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range duplicateComponents(&scribev1.Experiment{Spec: scribev1.ExperimentSpec{Targets: tc.targets}}) {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
