package render

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestAppendYAMLWritesWhatTheEncoderWrites: every golden object written by
// appendYAML is byte for byte what sigs.k8s.io/yaml.Marshal and the
// yaml/v2 encoder write.
func TestAppendYAMLWritesWhatTheEncoderWrites(t *testing.T) {
	objs := goldenObjects(t)
	files := make([]string, 0, len(objs))
	for f := range objs {
		files = append(files, f)
	}
	sort.Strings(files)
	var declined []string
	for _, f := range files {
		got, ok := appendYAML(nil, objs[f])
		if !ok {
			declined = append(declined, f)
			continue
		}
		want, err := yaml.Marshal(objs[f])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n%s\nwant (sigs.k8s.io/yaml):\n%s", f, got, want)
		}
		enc, err := encodeYAMLStream(objs[f])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, enc) {
			t.Errorf("%s:\n%s\nwant (encoder):\n%s", f, got, enc)
		}
	}
	t.Logf("%d golden objects, %d written by the encoder: %v", len(files), len(declined), declined)
}

// yamlCases are values appendYAML writes (handled) or leaves to the
// encoder, under a key and in a list.
var yamlCases = []struct {
	value   any
	handled bool
}{
	{"plain", true},
	{"", true},
	{"ghcr.io/example/checkout:1.4.2", true},
	{"http://otel-collector.observability.svc.cluster.local:4317", true},
	{"app.kubernetes.io/name", true},
	{"100m", true},
	{"128Mi", true},
	{"1.4.2", true},
	{"v1", true},
	{"-x", true},
	{"a,b[c]{d}?", true},
	{"a#b", true},
	{"two words", true},
	{"'quoted' \"x\"", false},
	{"80", true},
	{"-7", true},
	{"+7", true},
	{"0x1F", true},
	{"0o17", true},
	{"017", true},
	{"1_000", true},
	{"0b101", true},
	{"-0b101", true},
	{"1e3", true},
	{"1.5", true},
	{".5", true},
	{".inf", true},
	{"-.Inf", true},
	{".x", true},
	{"2001-12-14", true},
	{"2001-12-14t21:59:43.10Z", true},
	{"2001-12-1x", true},
	{"10:30", true},
	{"190:20:30.15", true},
	{"1:2:3x", true},
	{"true", true},
	{"True", true},
	{"yes", true},
	{"y", true},
	{"on", true},
	{"OFF", true},
	{"no", true},
	{"null", true},
	{"~", true},
	{"<<", true},
	{`a"b`, true},
	{`"x"`, false},
	{`a\b`, true},
	{"99999999999999999999", true},
	{"18446744073709551615", true},
	{json.Number("18446744073709551615"), true},
	{json.Number("9223372036854775808"), true},
	{json.Number("-0"), true},
	{json.Number("1.0"), true},
	{json.Number("2.5e+20"), true},
	{json.Number("1e-7"), true},
	{true, true},
	{nil, true},
	{map[string]any{}, true},
	{[]any{}, true},
	{[]any{[]any{"a", "b"}, []any{}, map[string]any{}}, true},
	{map[string]any{"b": []any{map[string]any{"c": "d", "e": []any{"f"}}}, "a": "x"}, true},
	{map[string]any{"a10": "1", "a9": "2", "a": "3", "A": "4", "_": "5", "a.b": "6", "a-b": "7", "a0": "8", "a00": "9", "a01": "10", "1": "11", "10": "12", "9": "13", "x1y": "14", "x01y": "15", "x1z": "16"}, true},
	{"a: b", false},
	{"a:", false},
	{"a #b", false},
	{"- x", false},
	{"-", false},
	{"?", false},
	{":x", true},
	{"*x", false},
	{"&x", false},
	{"!x", false},
	{"%x", false},
	{"@x", false},
	{"`x", false},
	{"|x", false},
	{">x", false},
	{"#x", false},
	{"'x", false},
	{"[x", false},
	{"{x", false},
	{",x", false},
	{"---x", false},
	{"...x", false},
	{" x", false},
	{"x ", false},
	{"two  spaces", true},
	{"line\nbreak", false},
	{"tab\there", false},
	{"é", false},
	{"80 80", true},
	{strings.Repeat("w", 65) + " fits", true},
	{strings.Repeat("w", 76) + " over", false},
	{strings.Repeat("word ", 20) + "end", false},
	{strings.Repeat("x", 128), true},
	{strings.Repeat("x", 129), false}, // as a key
}

// TestAppendYAMLCases: what appendYAML writes is what the encoder writes,
// and it writes what it is meant to.
func TestAppendYAMLCases(t *testing.T) {
	for _, tc := range yamlCases {
		obj := map[string]any{"key": tc.value, "list": []any{tc.value, map[string]any{"in": tc.value}}}
		if s, ok := tc.value.(string); ok {
			obj[s] = "k"
		}
		got, ok := appendYAML(nil, obj)
		if ok != tc.handled {
			t.Errorf("%q: handled %v, want %v:\n%s", tc.value, ok, tc.handled, got)
		}
		if !ok {
			continue
		}
		want, err := encodeYAMLStream(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%q:\n%s\nwant:\n%s", tc.value, got, want)
		}
	}
}

// FuzzAppendYAML: whatever appendYAML writes is what the encoder writes.
func FuzzAppendYAML(f *testing.F) {
	for _, tc := range yamlCases {
		if s, ok := tc.value.(string); ok {
			f.Add(s, s, 0)
		}
	}
	f.Fuzz(func(t *testing.T, key, value string, depth int) {
		var v any = value
		for range depth % 4 {
			v = []any{map[string]any{key: v, "k": value}, v}
		}
		obj := map[string]any{key: v, "a" + key: []any{value, key}, "n": json.Number("12")}
		got, ok := appendYAML(nil, obj)
		if !ok {
			return
		}
		want, err := encodeYAMLStream(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%q/%q:\n%s\nwant:\n%s", key, value, got, want)
		}
	})
}
