package render

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// compiledFromRegistry compiles every kind of the CUE registry, once per
// test binary (several seconds).
var compiledFromRegistry = sync.OnceValues(func() (map[string]*compiledSchema, error) {
	e, err := New()
	if err != nil {
		return nil, err
	}
	reg, err := e.registrySchemas()
	if err != nil {
		return nil, err
	}
	out := map[string]*compiledSchema{}
	var errs []string
	for kind, schema := range reg {
		cs, err := compileSchema(e.ctx, schema)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", kind, err))
			continue
		}
		out[kind] = cs
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
})

// TestCompiledSchemasTranslateEverything: the compiler translates every
// construct of every registry schema; nothing is left to CUE at run time.
func TestCompiledSchemasTranslateEverything(t *testing.T) {
	compiled, err := compiledFromRegistry()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for k := range compiled {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		if u := compiled[k].untranslated; len(u) > 0 {
			t.Errorf("%s: the compiler cannot translate:\n  %s\nteach it (schemacompile_test.go)", k, strings.Join(u, "\n  "))
		}
	}
}

const schemaChecksFile = "schemachecks.json.gz"

func gunzip(t testing.TB, data []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEmbeddedSchemaChecks is the drift check of the embedded schema
// checks: they must be what the current CUE registry compiles to. With
// -update (`make generate`) it rewrites them.
func TestEmbeddedSchemaChecks(t *testing.T) {
	compiled, err := compiledFromRegistry()
	if err != nil {
		t.Fatal(err)
	}
	want, err := encodeSchemaChecks(compiled)
	if err != nil {
		t.Fatal(err)
	}
	// -update is the flag of the golden tests (golden_test.go), in the
	// same test binary.
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		gz, err := gzipSchemaChecks(want)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(schemaChecksFile, gz, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote render/%s: %d kinds, %d bytes (%d uncompressed)", schemaChecksFile, len(compiled), len(gz), len(want))
		return
	}
	got, err := os.ReadFile(schemaChecksFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gunzip(t, got), want) {
		t.Fatalf("render/%s is stale: the CUE registry compiles to other checks; run make generate", schemaChecksFile)
	}
}

// TestEmbeddedSchemaChecksRoundTrip: decoding the embedded file and
// encoding what it builds gives the file back, so decoding loses nothing.
func TestEmbeddedSchemaChecksRoundTrip(t *testing.T) {
	checks, err := decodeSchemaChecks(embeddedSchemaChecks)
	if err != nil {
		t.Fatal(err)
	}
	built := map[string]*compiledSchema{}
	for k, l := range checks.kinds {
		cs, err := l.get()
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		built[k] = cs
	}
	again, err := encodeSchemaChecks(built)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, gunzip(t, embeddedSchemaChecks)) {
		t.Fatal("the decoded schema checks encode to another file")
	}
}

// goldenObjects reads every rendered object of the golden trees.
func goldenObjects(t testing.TB) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	err := filepath.WalkDir("../fixtures/golden", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") || filepath.Base(p) == "kustomization.yaml" {
			return err
		}
		// The templates' objects: in a bundle's directory (beside its
		// .scribe.json) or its sync file, not a hydrated catalog
		// component's (in a subdirectory), which Scribe builds from the
		// catalog's manifests and does not check against its registry.
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), ".scribe.json")); err != nil && !strings.HasSuffix(p, ".sync.yaml") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		js, err := sigsyaml.YAMLToJSON(data)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		m, err := decodeData(js)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		out[p] = m
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no golden objects")
	}
	return out
}

func decodeData(js []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var m map[string]any
	err := dec.Decode(&m)
	return m, err
}

// mutation is one invalid variant of an object.
type mutation struct {
	what string
	obj  map[string]any
}

// mutations of obj: at every struct an unknown field, and every field
// removed; every scalar replaced by a value of the wrong type, an
// out-of-range value and a value outside any enum or pattern; every list
// emptied and grown.
func mutations(obj map[string]any) []mutation {
	var out []mutation
	var walk func(path []any, v any)
	walk = func(path []any, v any) {
		replace := func(what string, nv any) {
			if _, isMap := nv.(map[string]any); len(path) == 0 && !isMap {
				return
			}
			out = append(out, mutation{what: fmt.Sprintf("%s %s", pathOf(path), what), obj: setAt(obj, path, nv)})
		}
		switch t := v.(type) {
		case map[string]any:
			m := copyMap(t)
			m["zzUnknownField"] = "x"
			replace("+unknown field", m)
			m2 := copyMap(t)
			m2["zzUnknownStruct"] = map[string]any{"a": json.Number("1")}
			replace("+unknown struct field", m2)
			replace("wrong type (string)", "not-a-struct")
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				m := copyMap(t)
				delete(m, k)
				replace("-field "+k, m)
				walk(append(path[:len(path):len(path)], k), t[k])
			}
		case []any:
			replace("emptied", []any{})
			replace("wrong type (string)", "not-a-list")
			if len(t) > 0 {
				grown := append(append([]any{}, t...), t...)
				for len(grown) < 70 {
					grown = append(grown, t[0])
				}
				replace("grown", grown)
				replace("+element of wrong type", append(append([]any{}, t...), json.Number("7")))
			}
			for i, e := range t {
				walk(append(path[:len(path):len(path)], i), e)
			}
		case string:
			replace("wrong type (int)", json.Number("12345"))
			replace("wrong type (bool)", true)
			replace("empty", "")
			replace("too long", strings.Repeat("a", 1100))
			replace("not in enum or pattern", "Not A Valid_Value!")
			replace("null", nil)
		case json.Number:
			replace("wrong type (string)", "x")
			replace("negative", json.Number("-1"))
			replace("huge", json.Number("99999999999"))
			replace("float", json.Number("0.5"))
			replace("zero", json.Number("0"))
		case bool:
			replace("wrong type (string)", "true")
			replace("wrong type (int)", json.Number("1"))
		case nil:
			replace("wrong type (string)", "x")
		}
	}
	walk(nil, obj)
	return out
}

func pathOf(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		}
	}
	if b.Len() == 0 {
		return "(object)"
	}
	return b.String()
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// setAt returns a copy of root with the value at path replaced by v
// (copying only the containers on the path).
func setAt(root any, path []any, v any) map[string]any {
	var set func(cur any, i int) any
	set = func(cur any, i int) any {
		if i == len(path) {
			return v
		}
		switch p := path[i].(type) {
		case string:
			m := copyMap(cur.(map[string]any))
			m[p] = set(m[p], i+1)
			return m
		case int:
			l := append([]any{}, cur.([]any)...)
			l[p] = set(l[p], i+1)
			return l
		}
		panic("bad path")
	}
	return set(root, 0).(map[string]any)
}

// TestCompiledSchemaRejectsWhatCUERejects is the parity check of the
// compiled schemas against CUE: every golden object is accepted by both,
// and of every mutation of every golden object, each one CUE rejects is
// rejected by the compiled check too. The compiled check may be stricter
// than CUE only by refusing unknown fields where CUE's closedness lets
// them through (lists of structs inside CRD-generated definitions); those
// are counted and logged.
func TestCompiledSchemaRejectsWhatCUERejects(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := e.registrySchemas()
	if err != nil {
		t.Fatal(err)
	}
	objs := goldenObjects(t)
	files := make([]string, 0, len(objs))
	for f := range objs {
		files = append(files, f)
	}
	sort.Strings(files)
	seen := map[string]bool{}
	var total, rejected, stricter int
	stricterByKind := map[string]int{}
	for _, f := range files {
		obj := objs[f]
		apiVersion, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		key := apiVersion + "/" + kind
		schema, ok := reg[key]
		if !ok {
			t.Errorf("%s: %s is not in the registry", f, key)
			continue
		}
		cs, ok, err := e.schemaCheck(key)
		if err != nil || !ok {
			t.Fatalf("%s: embedded check: %v (found %v)", key, err, ok)
		}
		raw, _ := json.Marshal(obj)
		if errs := e.checkWithCUE(schema, raw); len(errs) > 0 {
			t.Errorf("%s: CUE rejects the golden object: %v", f, errs)
		}
		if errs := cs.check(obj); len(errs) > 0 {
			t.Errorf("%s: the compiled schema rejects the golden object: %v", f, errs)
		}
		for _, m := range mutations(obj) {
			raw, err := json.Marshal(m.obj)
			if err != nil {
				t.Fatal(err)
			}
			// The same mutation of the same data (another fixture's
			// identical object) is checked once.
			dedup := key + "\x00" + m.what
			if seen[dedup] {
				continue
			}
			seen[dedup] = true
			total++
			cueErrs := e.checkWithCUE(schema, raw)
			// The compiled check reads data as the render decodes it.
			data, err := decodeData(raw)
			if err != nil {
				t.Fatal(err)
			}
			goErrs := cs.check(data)
			switch {
			case len(cueErrs) > 0 && len(goErrs) == 0:
				t.Errorf("%s (%s): %s: CUE rejects, the compiled schema accepts:\n  %v", f, key, m.what, cueErrs)
			case len(cueErrs) > 0:
				rejected++
			case len(goErrs) > 0:
				stricter++
				stricterByKind[key]++
				for _, ge := range goErrs {
					if ge.Message != "field not allowed" {
						t.Errorf("%s (%s): %s: the compiled schema rejects what CUE accepts, not as an unknown field: %v", f, key, m.what, goErrs)
						break
					}
				}
			}
		}
	}
	t.Logf("%d golden objects, %d distinct mutations: %d rejected by both, %d accepted by both, %d unknown fields rejected only by the compiled schema %v",
		len(objs), total, rejected, total-rejected-stricter, stricter, stricterByKind)
}

// ConfigMap binaryData is Go []byte (CUE bytes): the compiled check takes
// what the apiserver decodes, standard padded base64.
func TestConfigMapBinaryDataIsBase64(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	cs, ok, err := e.schemaCheck("v1/ConfigMap")
	if err != nil || !ok {
		t.Fatalf("no ConfigMap check: %v", err)
	}
	for value, valid := range map[string]bool{
		"":                 true,
		"aGVsbG8=":         true,
		"aGVs\nbG8=":       true,  // encoding/json skips line breaks
		"aGVsbG8":          false, // unpadded
		"aGVsbG8-":         false, // URL alphabet
		"not base64!":      false,
		"aGVsbG8=aGVsbG8=": false,
	} {
		obj := map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata":   map[string]any{"name": "x"},
			"binaryData": map[string]any{"f": value},
		}
		errs := cs.check(obj)
		if valid && len(errs) > 0 {
			t.Errorf("%q: %v", value, errs)
		}
		if !valid && (len(errs) != 1 || errs[0].Path != "binaryData.f" || !strings.Contains(errs[0].Message, "not base64")) {
			t.Errorf("%q: want one base64 error at binaryData.f, got %v", value, errs)
		}
	}
	if errs := cs.check(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}, "binaryData": map[string]any{"f": json.Number("1")}}); len(errs) == 0 {
		t.Error("a number in binaryData is accepted")
	}
}

// Decoding the embedded schema checks and building every kind: what a
// process pays once, spread over the first render of each kind.
func BenchmarkDecodeSchemaChecks(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		checks, err := decodeSchemaChecks(embeddedSchemaChecks)
		if err != nil {
			b.Fatal(err)
		}
		for k, l := range checks.kinds {
			if _, err := l.get(); err != nil {
				b.Fatalf("%s: %v", k, err)
			}
		}
	}
}

// A render uses the embedded checks only: it neither loads the CUE
// registry nor compiles a schema.
func TestRenderDoesNotLoadTheRegistry(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"workload-keda.yaml", "gateway-tutorial.yaml"} {
		data, err := os.ReadFile(filepath.Join("../fixtures/valid", f))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := ObjectsFromYAML(data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Render(context.Background(), Input{Object: objs[0], Publish: DefaultPublish(), Resolved: internalTestResolved}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if e.registry != nil || e.registryErr != nil {
		t.Error("rendering loaded the CUE schema registry")
	}
}
