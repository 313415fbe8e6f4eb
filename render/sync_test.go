package render_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/render"
)

// With Flux and a FluxSource, a custom resource's sync file holds its own
// GitRepository, a sparse checkout of its directory on Scribe's branch
// with Flux's credentials, and the Kustomization reads it; without one
// (the CLI's default, an OCI repository) the Kustomization reads the
// Repository's source and there is no per-CR source. (Argo CD: see
// argocd_test.go.)
func TestSyncFileHoldsTheCustomResourcesOwnFluxSource(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(fixturesDir, "valid", "workload-canary-50.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render.ObjectsFromYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	perCR := render.DefaultPublish()
	perCR.Path = "clusters/dev"
	perCR.Applier.Revision = "prod"
	perCR.Applier.FluxSource = &render.FluxGitSource{URL: "ssh://git@git.internal/acme/experiments.git", SecretRef: "deploy-key", Provider: "generic"}
	// With per-CR artifacts (spec.git.artifacts) the own source is an
	// OCIRepository on <url>/<sync name>:latest, pulling as the
	// Repository's Flux account.
	perCROCI := perCR
	perCROCI.Applier.ServiceAccountName = "shop-deployer"
	perCROCI.Applier.FluxArtifact = &render.FluxArtifactSource{URL: "oci://registry.internal:5000/acme/scribe", Insecure: true}
	for _, tc := range []struct {
		name       string
		pub        render.Publish
		wantSource string // the sync file's first document, "" for none
		wantRef    string // the Kustomization's sourceRef.name
		wantKind   string // the Kustomization's sourceRef.kind, GitRepository when empty
	}{
		{"shared source", render.DefaultPublish(), "", "scribe", ""},
		{"per-CR source", perCR, `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  labels:
    app.kubernetes.io/managed-by: scribe
    scribe.dev/kind: Workload
    scribe.dev/name: checkout
    scribe.dev/namespace: shop
  name: workload.shop.checkout
  namespace: flux-system
spec:
  interval: 10m
  provider: generic
  ref:
    branch: prod
  secretRef:
    name: deploy-key
  sparseCheckout:
  - clusters/dev/shop/workload/checkout
  url: ssh://git@git.internal/acme/experiments.git
`, "workload.shop.checkout", ""},
		{"per-CR artifact", perCROCI, `apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  labels:
    app.kubernetes.io/managed-by: scribe
    scribe.dev/kind: Workload
    scribe.dev/name: checkout
    scribe.dev/namespace: shop
  name: workload.shop.checkout
  namespace: flux-system
spec:
  insecure: true
  interval: 10m
  ref:
    tag: latest
  serviceAccountName: shop-deployer
  url: oci://registry.internal:5000/acme/scribe/workload.shop.checkout
`, "workload.shop.checkout", "OCIRepository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantKind := tc.wantKind
			if wantKind == "" {
				wantKind = "GitRepository"
			}
			b, err := e.Render(context.Background(), render.Input{Object: objs[0], Publish: tc.pub, Resolved: testResolved})
			if err != nil {
				t.Fatal(err)
			}
			var sync []byte
			for _, f := range b.Files {
				if strings.HasSuffix(f.Path, ".sync.yaml") {
					sync = f.Data
				}
			}
			docs := strings.Split(string(sync), "\n---\n")
			if tc.wantSource == "" {
				if len(docs) != 1 || b.SyncSource != nil {
					t.Fatalf("want one sync object and no source, got %d documents, source %v:\n%s", len(docs), b.SyncSource, sync)
				}
			} else {
				if len(docs) != 2 || docs[0]+"\n" != tc.wantSource {
					t.Fatalf("sync file:\n%s\nwant its first document:\n%s", sync, tc.wantSource)
				}
				if b.SyncSource == nil || b.SyncSource.Kind != wantKind || b.SyncSource.Name != b.Sync.Name || b.SyncSource.Namespace != b.Sync.Namespace {
					t.Fatalf("SyncSource = %+v, want the %s named like %+v", b.SyncSource, wantKind, b.Sync)
				}
			}
			if tc.wantRef == "" {
				return
			}
			var ks struct {
				Kind string
				Spec struct {
					Path      string
					SourceRef struct{ Kind, Name, Namespace string }
				}
			}
			if err := yaml.Unmarshal([]byte(docs[len(docs)-1]), &ks); err != nil {
				t.Fatal(err)
			}
			if ks.Kind != "Kustomization" || ks.Spec.SourceRef.Kind != wantKind || ks.Spec.SourceRef.Name != tc.wantRef || ks.Spec.SourceRef.Namespace != "flux-system" {
				t.Fatalf("Kustomization %+v, want sourceRef %s flux-system/%s", ks, wantKind, tc.wantRef)
			}
		})
	}
}

// Sync objects share the applier's namespace, so their names are
// one-to-one: `<kind>.<namespace>.<name>` (a namespace holds no dot).
// kustomize-controller labels every object a Kustomization applies with
// the Kustomization's name, and a label value holds at most 63 characters:
// a longer Flux name keeps its first 46 characters (no trailing '-' or
// '.') and ends in the first 16 hex digits of sha256("<namespace>/<name>");
// the custom resource's own GitRepository is named alike. Argo CD's names
// (tracked by annotation) are left whole. A custom resource whose sync
// object carries the name an earlier release gave it
// (`<kind>-<namespace>-<name>`, shortened alike to 54 + 8) keeps it, and
// only that one.
func TestFluxSyncNamesAreOneToOneAndFitALabelValue(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	workload := loadFixture(t, "workload-canary-50.yaml")
	hashed := func(prefix, ns, name string) string {
		sum := sha256.Sum256([]byte(ns + "/" + name))
		return prefix + "-" + hex.EncodeToString(sum[:])[:16]
	}
	legacyHashed := func(prefix, ns, name string) string {
		sum := sha256.Sum256([]byte(ns + "/" + name))
		return prefix + "-" + hex.EncodeToString(sum[:])[:8]
	}
	perCR := render.DefaultPublish()
	perCR.Applier.FluxSource = &render.FluxGitSource{URL: "https://git.example/acme.git"}
	keeping := func(p render.Publish, name string) render.Publish {
		p.SyncName = name
		return p
	}
	ns36 := strings.Repeat("n", 36) // "workload." + 36 = 45: the 46th character is the '.'
	const longNS, longName = "team-payments-production-eu-west", "checkout-frontend-primary"
	for _, tc := range []struct {
		name, ns, crName string
		pub              render.Publish
		want             string
	}{
		{"short name: kind, namespace and name joined by dots", "shop", "checkout", perCR, "workload.shop.checkout"},
		{"63 characters unchanged", "team-payments", strings.Repeat("c", 63-len("workload.team-payments.")), perCR,
			"workload.team-payments." + strings.Repeat("c", 63-len("workload.team-payments."))},
		{"68 characters: 46 kept and 16 hex digits of a hash", longNS, longName, perCR,
			hashed("workload.team-payments-production-eu-west.chec", longNS, longName)},
		{"the same 46 characters, another hash", longNS, longName + "2", perCR,
			hashed("workload.team-payments-production-eu-west.chec", longNS, longName+"2")},
		{"a '.' at the cut is dropped", ns36, "web-frontend-and-more-words", perCR, hashed("workload."+ns36, ns36, "web-frontend-and-more-words")},
		{"with the Repository's shared source too", longNS, longName, render.DefaultPublish(),
			hashed("workload.team-payments-production-eu-west.chec", longNS, longName)},
		{"Argo CD keeps the whole name", longNS, longName, argoPublish(), "workload.team-payments-production-eu-west.checkout-frontend-primary"},
		// The migration: the name an earlier release gave this very custom
		// resource is kept; any other name passed is not.
		{"an earlier release's name is kept", "shop", "checkout", keeping(perCR, "workload-shop-checkout"), "workload-shop-checkout"},
		{"an earlier release's shortened name is kept", longNS, longName,
			keeping(perCR, legacyHashed("workload-team-payments-production-eu-west-checkout-fro", longNS, longName)),
			legacyHashed("workload-team-payments-production-eu-west-checkout-fro", longNS, longName)},
		{"an earlier release's Argo CD name is kept", longNS, longName, keeping(argoPublish(), "workload-"+longNS+"-"+longName), "workload-" + longNS + "-" + longName},
		{"another custom resource's earlier name is not taken", "shop", "checkout", keeping(perCR, "workload-shop-cart"), "workload.shop.checkout"},
		{"another tenant's earlier name is not taken", "team", "a-web", keeping(perCR, "workload-team-b-web"), "workload.team.a-web"},
		{"a new name passed is the new name", "team", "a-web", keeping(perCR, "workload.team.a-web"), "workload.team.a-web"},
		{"an arbitrary name is not taken", "shop", "checkout", keeping(perCR, "flux-system"), "workload.shop.checkout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := k8sruntime.DeepCopyJSON(workload)
			md := obj["metadata"].(map[string]any)
			md["namespace"], md["name"] = tc.ns, tc.crName
			if len(tc.crName) > 40 { // the Workload's Service and Deployments are named after it
				obj["spec"].(map[string]any)["service"].(map[string]any)["name"] = "web"
			}
			b, err := e.Render(context.Background(), render.Input{Object: obj, Publish: tc.pub, Resolved: testResolved})
			if err != nil {
				t.Fatal(err)
			}
			if b.Sync.Name != tc.want {
				t.Fatalf("sync object %s %q (%d characters), want %q", b.Sync.Kind, b.Sync.Name, len(b.Sync.Name), tc.want)
			}
			if tc.pub.Applier.Kind == "Flux" && len(b.Sync.Name) > 63 {
				t.Fatalf("Kustomization name of %d characters", len(b.Sync.Name))
			}
			if tc.pub.Applier.FluxSource != nil && (b.SyncSource == nil || b.SyncSource.Name != tc.want) {
				t.Fatalf("sync source %+v, want the GitRepository %q", b.SyncSource, tc.want)
			}
		})
	}
}
