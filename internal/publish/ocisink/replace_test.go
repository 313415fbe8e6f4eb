package ocisink

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Replace pushes exactly the files given, whatever the tag held, with the
// revision annotation asked for; pushing the same content again keeps
// the digest; Remove deletes the tag, and removing a missing tag is no
// error.
func TestReplacePushesTheWholeArtifactAndRemoveDeletesIt(t *testing.T) {
	reg := newRegistry(t, "", "")
	url := reg.url("scribe/0a1b2c3d/workload.shop.web:latest")
	sink := newSink(t, Options{URL: url, Revision: "main@sha1:6f1c2e0b9d8a7c6b5a4f3e2d1c0b9a8f7e6d5c4b"})
	ctx := t.Context()

	first, err := sink.Replace(ctx, map[string][]byte{"shop/workload/web/a.yaml": []byte("a: 1\n"), "shop/workload/web/b.yaml": []byte("b: 1\n")})
	if err != nil {
		t.Fatal(err)
	}
	second, err := sink.Replace(ctx, map[string][]byte{"shop/workload/web/a.yaml": []byte("a: 2\n")})
	if err != nil {
		t.Fatal(err)
	}
	files, err := sink.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(files)); !slices.Equal(got, []string{"shop/workload/web/a.yaml"}) || string(files["shop/workload/web/a.yaml"]) != "a: 2\n" {
		t.Fatalf("after Replace the artifact holds %v, want only the second push's a.yaml", files)
	}
	if first.Commit == second.Commit {
		t.Fatal("different content pushed under one digest")
	}
	again, err := sink.Replace(ctx, map[string][]byte{"shop/workload/web/a.yaml": []byte("a: 2\n")})
	if err != nil || again.Commit != second.Commit {
		t.Fatalf("the same content again: digest %s, want %s (%v)", again.Commit, second.Commit, err)
	}
	opts, err := sink.session(ctx, transport.PullScope)
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := sink.pull(opts, "pull")
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if rev := m.Annotations[AnnotationRevision]; rev != "main@sha1:6f1c2e0b9d8a7c6b5a4f3e2d1c0b9a8f7e6d5c4b" {
		t.Fatalf("revision annotation %q", rev)
	}

	if err := sink.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if files, err := sink.Fetch(ctx); err != nil || len(files) != 0 {
		t.Fatalf("after Remove the tag holds %v (%v), want nothing", files, err)
	}
	if err := sink.Remove(ctx); err != nil {
		t.Fatalf("removing a missing tag: %v", err)
	}
}
