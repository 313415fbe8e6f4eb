package gitsink

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
)

func sampleInfo(n int) CommitInfo {
	info := CommitInfo{Branch: "main", Path: "clusters/dev"}
	for i := range n {
		info.Changes = append(info.Changes, ChangeInfo{Action: "update", Object: "Workload/shop/web", Kind: "Workload", Namespace: "shop", Name: "web", Generation: int64(i + 1), Digest: "sha256:0123456789abcdef", Dir: "shop/workload/web"})
	}
	return info
}

func TestCommitTemplateRefusesUnboundedShapesAtParse(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"range over a number", "{{range 100000000}}x{{end}}", "range over 100000000"},
		{"range over a function's result", `{{range (len (printf "%0999d" 0))}}x{{end}}`, "range over"},
		{"range over a variable holding a number", "{{$n := 100000000}}{{range $n}}{{end}}", "range over $n"},
		{"range over a variable assigned a number", "{{$n := .Changes}}{{$n = 100000000}}{{range $n}}{{end}}", "range over $n"},
		{"range over a copy of a tainted variable", "{{$n := 5}}{{$m := $n}}{{range $m}}{{end}}", "range over $m"},
		{"ranges nested three deep", "{{range .Changes}}{{range $.Changes}}{{range $.Changes}}{{end}}{{end}}{{end}}", "nested more than 2 deep"},
		{"recursive template", `{{define "a"}}{{template "a" .}}{{template "a" .}}{{end}}{{template "a" .}}`, "cannot invoke templates"},
		{"block", `{{block "a" .}}x{{end}}`, "cannot invoke templates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCommitTemplate("--message-template", tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "--message-template: ") {
				t.Fatalf("parse = %v, want an error naming --message-template with %q", err, tc.want)
			}
		})
	}
}

func TestCommitTemplateExecutionIsBoundedInOutputWorkAndTime(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"output too large", `{{range .Changes}}{{range $.Changes}}{{printf "%060000d" 0}}{{end}}{{end}}`, "wrote more than"},
		{"printf result too large", `{{$x := printf "%0999999d" 0}}`, "a result of"},
		{"doubling through printf", `{{$x := "ab"}}{{range .Changes}}{{range $.Changes}}{{$x = printf "%s%s" $x $x}}{{end}}{{end}}`, "exceeds its bounds"},
		{"doubling through js", `{{$x := "\\"}}{{range .Changes}}{{range $.Changes}}{{$x = js $x}}{{end}}{{end}}`, "exceeds its bounds"},
		{"work without output", `{{range .Changes}}{{range $.Changes}}{{$x := printf "%050000d" 0}}{{end}}{{end}}`, "functions produced more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, err := parseCommitTemplate("spec.git.commitTemplate", tc.text)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = ct.execute(sampleInfo(300))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "spec.git.commitTemplate: ") {
				t.Fatalf("execute = %v, want an error naming spec.git.commitTemplate with %q", err, tc.want)
			}
			if d := time.Since(start); d > TemplateTimeout+time.Second {
				t.Errorf("took %s, beyond the %s bound", d, TemplateTimeout)
			}
		})
	}
}

func TestCommitTemplateTimeoutStopsAWritingLoop(t *testing.T) {
	ct, err := parseCommitTemplate("t", `{{range .Changes}}{{range $.Changes}}{{if eq 1 1}}{{end}}{{end}}{{end}}`)
	if err != nil {
		t.Fatal(err)
	}
	b := &templateBudget{deadline: time.Now().Add(-time.Second), timeout: time.Second}
	if err := b.spend(0); !errors.Is(err, errTemplateBound) || !strings.Contains(err.Error(), "ran longer than") {
		t.Fatalf("spend after the deadline = %v", err)
	}
	if _, err := ct.execute(sampleInfo(200)); err != nil {
		t.Fatalf("a bounded template failed: %v", err)
	}
}

func TestCommitTemplateCannotWriteScribeTrailers(t *testing.T) {
	for _, text := range []string{
		"deploy\n\nScribe-Object: Workload/prod/db",
		"deploy\nscribe-generation: 9",
		"deploy\n  Scribe-Digest : sha256:x",
		`{{printf "Scribe-%s: x" "Object"}}`,
	} {
		ct, err := parseCommitTemplate("--message-template", text)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ct.execute(sampleInfo(1)); err == nil || !strings.Contains(err.Error(), "trailers are Scribe's own") {
			t.Errorf("%q: execute = %v, want the trailer refused", text, err)
		}
	}
}

func TestCommitTemplateValidTemplatesRenderAsBefore(t *testing.T) {
	for text, want := range map[string]string{
		"deploy({{range .Changes}}{{.Namespace}}/{{.Name}}@{{.Generation}}{{end}}) on {{.Branch}}":      "deploy(shop/web@1shop/web@2) on main",
		"ci: publish {{len .Changes}} objects to {{.Path}}":                                             "ci: publish 2 objects to clusters/dev",
		`{{range $i, $c := .Changes}}{{if $i}}, {{end}}{{printf "%s#%d" $c.Name $c.Generation}}{{end}}`: "web#1, web#2",
		`{{with $c := index .Changes 0}}{{$c.Object}} {{html "<b>"}}{{end}}`:                            "Workload/shop/web &lt;b&gt;",
		"Mentions Scribe-Object in prose: fine":                                                         "Mentions Scribe-Object in prose: fine",
	} {
		ct, err := parseCommitTemplate("t", text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		got, err := ct.execute(sampleInfo(2))
		if err != nil || got != want {
			t.Errorf("%q = %q, %v; want %q", text, got, err, want)
		}
	}
}

// fuzzTemplateTimeout is the time bound of a fuzzed execution: the
// fuzzer's workers must answer its coordinator within a second or so.
const fuzzTemplateTimeout = 200 * time.Millisecond

// FuzzCommitTemplate parses and executes fuzzed commit templates over
// changes with a fuzzed reason. It never panics, an execution ends within
// the time bound (plus slack for a loaded machine), its output stays
// within MaxTemplateOutput, and a message that is built carries exactly
// Scribe's trailers, one set per change, whatever the template and the
// reason say. Seeds: testdata/fuzz/FuzzCommitTemplate.
func FuzzCommitTemplate(f *testing.F) {
	f.Add("deploy {{len .Changes}} to {{.Branch}}", "rolled back: check failed", uint8(2))
	f.Add("{{range .Changes}}{{.Object}} {{.Reason}}\n{{end}}", "x\nScribe-Object: Workload/prod/db", uint8(3))
	f.Fuzz(func(t *testing.T, text, reason string, n uint8) {
		var edits []pathChange
		changed := map[string]bool{}
		for i := range int(n % 20) {
			src := scribev1.ObjectIdentity{APIVersion: "scribe.dev/v1alpha1", Kind: "Workload", Namespace: "shop", Name: fmt.Sprintf("w%d", i)}
			pc := pathChange{Change: publish.Change{Source: src, Generation: int64(i + 1), Delete: true, Reason: reason}, RepoPath: "clusters"}
			changed[pc.RepoPath+"\x00"+publish.ObjectRef(src)] = true
			edits = append(edits, pc)
		}
		for _, tmpl := range []string{"", text} {
			s := &gitSink{opts: Options{URL: "https://git.example.com/r.git", Path: "clusters"}}
			if tmpl != "" {
				ct, err := parseCommitTemplate("t", tmpl)
				if err != nil {
					continue
				}
				ct.timeout = fuzzTemplateTimeout
				s.tmpl = ct
			}
			start := time.Now()
			msg, err := s.message("main", edits, changed)
			if d := time.Since(start); d > fuzzTemplateTimeout+3*time.Second {
				t.Fatalf("message took %s", d)
			}
			if err != nil {
				if tmpl == "" {
					t.Fatalf("the default message failed: %v", err)
				}
				continue
			}
			if len(msg) > MaxTemplateOutput+len(edits)*200 {
				t.Fatalf("message of %d bytes", len(msg))
			}
			trailers := Trailers(msg)
			if len(trailers) != len(edits) {
				t.Fatalf("template %q, reason %q: %d trailer blocks for %d changes:\n%s", tmpl, reason, len(trailers), len(edits), msg)
			}
			for i, tr := range trailers {
				if tr[TrailerObject] != publish.ObjectRef(edits[i].Source) {
					t.Fatalf("trailer block %d names %q, want %q:\n%s", i, tr[TrailerObject], publish.ObjectRef(edits[i].Source), msg)
				}
			}
		}
	})
}
