package publish_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/scribe-gitops/scribe/internal/publish"
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

func stepTwoBody() publish.ProposalBody {
	return publish.ProposalBody{
		Object: "Workload team-a/web", Generation: 4, Base: "main",
		Summary: "Rolling out **v2** (canary), step 2 of 3: v1=50%,v2=50%.",
		Dir:     "clusters/dev/team-a/workload/web",
		Digest:  "sha256:3f1c0d2e",
		Objects: []publish.ObjectChange{
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
	b.Objects = []publish.ObjectChange{{Op: "added", Kind: "Deployment", Namespace: "team-a", Name: "web-v1", File: "clusters/dev/team-a/workload/web/deployment-web-v1.yaml"}}
	b.Evidence = ""
	golden(t, "pr-body-first.md", b.String())
}

func TestProposalBodyIsCutToTheForgeLimitSayingSo(t *testing.T) {
	b := stepTwoBody()
	for i := range 5000 {
		b.Objects = append(b.Objects, publish.ObjectChange{Op: "added", Kind: "ConfigMap", Namespace: "team-a", Name: strings.Repeat("x", 20) + string(rune('a'+i%26)), File: "clusters/dev/team-a/workload/web/configmap.yaml"})
	}
	b.Evidence = strings.Repeat("é check value ", 20000)
	got := b.String()
	if len(got) > publish.MaxProposalBody {
		t.Fatalf("body is %d bytes, over %d", len(got), publish.MaxProposalBody)
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
