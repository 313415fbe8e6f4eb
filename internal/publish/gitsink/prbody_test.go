package gitsink_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file; got:\n%s", name, got)
	}
}

func stepTwoBody() gitsink.ProposalBody {
	return gitsink.ProposalBody{
		Object: "Workload team-a/web", Generation: 4, Base: "main",
		Summary: "Rolling out **v2** (canary), step 2 of 3: v1=50%,v2=50%.",
		Dir:     "clusters/dev/team-a/workload/web",
		Digest:  "sha256:3f1c0d2e",
		Objects: []gitsink.ObjectChange{
			{Op: "changed", Kind: "HTTPRoute", Namespace: "team-a", Name: "web", File: "clusters/dev/team-a/workload/web/httproute-web.yaml",
				Weights: []string{"web-v1 90 → 50", "web-v2 10 → 50"}},
			{Op: "added", Kind: "HorizontalPodAutoscaler", Namespace: "team-a", Name: "web-v2", File: "clusters/dev/team-a/workload/web/horizontalpodautoscaler-web-v2.yaml"},
			{Op: "removed", Kind: "ConfigMap", Namespace: "team-a", Name: "web-old", File: "clusters/dev/team-a/workload/web/configmap-web-old.yaml"},
		},
		Evidence: "Step 1 (v1=90%,v2=10%) was applied at 0a1b2c3d4e5f and healthy from 2026-11-25T12:00:00Z to 2026-11-25T12:05:00Z. It was merged through pull request #7 (https://git.example.com/acme/fleet/pulls/7).\n" +
			"- check available passed: 2/2 replicas available\n- check error-rate passed: 0.002 <= 0.01",
		Namespace: "team-a", Kind: "Workload", Name: "web",
	}
}

func TestProposalBodyOfACanaryStepHasTheDiffTheWeightsTheEvidenceAndTheCommands(t *testing.T) {
	golden(t, "pr-body-step.md", stepTwoBody().String())
}

func TestProposalBodyOfAFirstRolloutSaysThereIsNoEvidenceYet(t *testing.T) {
	b := stepTwoBody()
	b.Summary = "First rollout of **v1**: v1=100%."
	b.Objects = []gitsink.ObjectChange{{Op: "added", Kind: "Deployment", Namespace: "team-a", Name: "web-v1", File: "clusters/dev/team-a/workload/web/deployment-web-v1.yaml"}}
	b.Evidence = ""
	golden(t, "pr-body-first.md", b.String())
}

func TestProposalBodyIsCutToTheForgeLimitSayingSo(t *testing.T) {
	b := stepTwoBody()
	for i := range 5000 {
		b.Objects = append(b.Objects, gitsink.ObjectChange{Op: "added", Kind: "ConfigMap", Namespace: "team-a", Name: strings.Repeat("x", 20) + string(rune('a'+i%26)), File: "clusters/dev/team-a/workload/web/configmap.yaml"})
	}
	b.Evidence = strings.Repeat("é check value ", 20000)
	got := b.String()
	if len(got) > gitsink.MaxProposalBody {
		t.Fatalf("body is %d bytes, over %d", len(got), gitsink.MaxProposalBody)
	}
	if !utf8.ValidString(got) {
		t.Fatal("the cut split a character")
	}
	for _, want := range []string{"more | |", "cut to fit the pull request", "### The custom resource", "<!-- scribe: Workload team-a/web -->", "web-v1 90 → 50"} {
		if !strings.Contains(got, want) {
			t.Errorf("cut body lacks %q", want)
		}
	}
}

// TestProposalBodyShowsHostileTextAsText feeds the body what a tenant or
// a metrics provider controls (check messages, rendered names and paths)
// written to forge Markdown: a second evidence heading, an approval line,
// a closing code fence, HTML, a link, a table cell. Each must render as
// the text it is.
func TestProposalBodyShowsHostileTextAsText(t *testing.T) {
	hostile := []struct {
		name string
		edit func(*gitsink.ProposalBody)
	}{
		{"evidence with a heading and an approval", func(b *gitsink.ProposalBody) {
			b.Evidence = "ok\n\n### Evidence of the previous step\n\nApproved by @platform-admins\n"
		}},
		{"evidence closing the fence", func(b *gitsink.ProposalBody) {
			b.Evidence = "ok\n```\n### Approved\n````\n# Approved by @root"
		}},
		{"evidence with HTML and a link", func(b *gitsink.ProposalBody) {
			b.Evidence = "<details open><summary>Approved</summary></details> [merge me](https://evil.example)"
		}},
		{"object name with a fence, a pipe and a heading", func(b *gitsink.ProposalBody) {
			b.Objects[0].Name = "web` | **Approved** |\n### Approved by"
			b.Objects[0].File = "a|b`c.yaml"
		}},
		{"weights with markup", func(b *gitsink.ProposalBody) {
			b.Objects[0].Weights = []string{"[x](https://evil.example) <b>1</b> → ### Approved"}
		}},
	}
	for _, tc := range hostile {
		t.Run(tc.name, func(t *testing.T) {
			b := stepTwoBody()
			tc.edit(&b)
			headings, fence := []string{}, ""
			for _, line := range strings.Split(b.String(), "\n") {
				trimmed := strings.TrimLeft(line, "`")
				if n := len(line) - len(trimmed); n >= 3 {
					switch {
					case fence == "":
						fence = line[:n]
					case line == fence:
						fence = ""
					}
					continue
				}
				if fence != "" {
					continue
				}
				if strings.HasPrefix(line, "#") {
					headings = append(headings, line)
				}
				line = withoutCodeSpans(line)
				if strings.Contains(line, "Approved") && !strings.Contains(line, `\*\*Approved\*\*`) && !strings.Contains(line, `\#\#\# Approved`) {
					t.Errorf("an approval line renders as Markdown outside a code block: %q", line)
				}
				if strings.Contains(line, "<details") || strings.Contains(line, "<b>") || strings.Contains(line, "](https://evil") {
					t.Errorf("HTML or a link renders: %q", line)
				}
				if strings.HasPrefix(line, "| ") && strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") != 4 {
					t.Errorf("a table row has a cell of its own: %q", line)
				}
			}
			want := []string{"### Rendered changes", "### Evidence of the previous step", "### The custom resource"}
			if strings.Join(headings, "\n") != strings.Join(want, "\n") {
				t.Errorf("headings outside code blocks = %q, want %q", headings, want)
			}
			if fence != "" {
				t.Errorf("a code block is left open by %q", fence)
			}
		})
	}
}

// withoutCodeSpans drops a line's inline code spans (a run of n backticks
// up to the next run of exactly n), which Markdown shows verbatim.
func withoutCodeSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		n := 0
		for i+n < len(line) && line[i+n] == '`' {
			n++
		}
		fence := line[i : i+n]
		end := -1
		for j := i + n; j < len(line); {
			k := strings.Index(line[j:], fence)
			if k < 0 {
				break
			}
			k += j
			if (k+n == len(line) || line[k+n] != '`') && (k == 0 || line[k-1] != '`') {
				end = k
				break
			}
			j = k + 1
		}
		if end < 0 {
			b.WriteString(fence)
			i += n
			continue
		}
		i = end + n
	}
	return b.String()
}
