package publishtest

import (
	"fmt"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/render"
)

// Bundle is a Workload's bundle of one ConfigMap holding content, for the
// sinks' tests.
func Bundle(ns, name, content string) *render.Bundle {
	src := scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: "Workload", Namespace: ns, Name: name}
	dir := publish.OwnedDir(src)
	return &render.Bundle{
		Dir:        dir,
		Source:     src,
		Generation: 1,
		Digest:     "sha256:" + fmt.Sprintf("%064x", len(content)+len(name)),
		Files: []render.File{
			{Path: dir + "/.scribe.json", Data: []byte(`{"source":"` + name + `"}` + "\n")},
			{Path: dir + "/configmap-" + name + ".yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  v: " + content + "\n")},
			{Path: dir + "/kustomization.yaml", Data: []byte("resources:\n- configmap-" + name + ".yaml\n")},
			{Path: dir + ".sync.yaml", Data: []byte("kind: Kustomization\nmetadata:\n  name: " + name + "\n")},
		},
	}
}
