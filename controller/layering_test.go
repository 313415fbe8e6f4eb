package controller

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayering holds, for `go test` as depguard does for `make lint`
// (.golangci.yml), the layering docs/DESIGN.md states ("Layout"): render
// never imports the controller, a sink or client-go; the pure decision
// files import no client, sink or render; publish and health never import
// the controller; the sinks (gitsink, ocisink) never import render. Test
// files may cross these lines.
func TestLayering(t *testing.T) {
	const mod = "github.com/scribe-gitops/scribe/"
	for _, rule := range []struct {
		files []string // globs from the repository root
		deny  []string // import path prefixes
		why   string
	}{
		{[]string{"render/*.go", "render/contract/*.go"},
			[]string{mod + "controller", mod + "internal/publish", "k8s.io/client-go", "sigs.k8s.io/controller-runtime/pkg/cache", "sigs.k8s.io/controller-runtime/pkg/manager", "sigs.k8s.io/controller-runtime/pkg/client/apiutil"},
			"render is a pure function of its input: it never reads the cluster, and never publishes"},
		{[]string{"controller/decision.go", "controller/delivery.go", "controller/rollout.go", "controller/rollout_steps.go", "controller/rollout_requests.go", "controller/rollout_webhooks.go", "controller/checks_value.go", "controller/checks_conditions.go", "controller/checks_budget.go", "controller/stages.go", "controller/pipeline.go"},
			[]string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go", mod + "internal/publish", mod + "render"},
			"a pure decision file imports no client, sink or render"},
		{[]string{"internal/publish/*.go", "internal/publish/*/*.go", "internal/health/*.go"},
			[]string{mod + "controller"},
			"publish and health sit below the controller"},
		{[]string{"internal/publish/gitsink/*.go", "internal/publish/ocisink/*.go"},
			[]string{mod + "render"},
			"a sink writes the changes publish's contract hands it: it never renders"},
	} {
		n := 0
		for _, glob := range rule.files {
			files, err := filepath.Glob(filepath.Join("..", glob))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if strings.HasSuffix(f, "_test.go") {
					continue
				}
				n++
				parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
				if err != nil {
					t.Fatal(err)
				}
				for _, imp := range parsed.Imports {
					p, _ := strconv.Unquote(imp.Path.Value)
					for _, d := range rule.deny {
						if p == d || strings.HasPrefix(p, d+"/") {
							t.Errorf("%s imports %s: %s", filepath.ToSlash(f[len(".."+string(filepath.Separator)):]), p, rule.why)
						}
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("no file matches %v", rule.files)
		}
	}
}

// TestSinkKnowsNoGatewayAPI holds the other half of the layering: the
// sinks know no particular kind of object. The Gateway API's route
// weights a pull request's description shows are read in the controller
// (routeWeightChange) and handed to publish as data.
func TestSinkKnowsNoGatewayAPI(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "internal", "publish", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := filepath.Glob(filepath.Join("..", "internal", "publish", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, sub...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, word := range []string{"backendRefs", "gateway.networking.k8s.io", "HTTPRoute"} {
			if strings.Contains(string(data), word) {
				t.Errorf("%s mentions %s: the sink knows no particular kind (docs/DESIGN.md, Layout)", filepath.ToSlash(f), word)
			}
		}
	}
}
