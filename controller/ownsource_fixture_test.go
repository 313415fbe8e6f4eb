package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scribe-gitops/scribe/controller"
)

// vouchForRemote adds remote to the remotes the shared Flux source
// flux-system/scribe says it fetches by another URL
// (controller.RemoteURLsAnnotation), as a platform does for a source that
// reaches its server by an in-cluster name: the fixtures' remotes are
// 127.0.0.1 servers, the source's URL an in-cluster Service's.
func vouchForRemote(t testing.TB, c client.Client, remote string) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		src := &sourcev1.GitRepository{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "flux-system", Name: "scribe"}, src); err != nil {
			return err
		}
		listed := strings.Split(src.Annotations[controller.RemoteURLsAnnotation], "\n")
		if slices.Contains(listed, remote) {
			return nil
		}
		if src.Annotations == nil {
			src.Annotations = map[string]string{}
		}
		src.Annotations[controller.RemoteURLsAnnotation] = strings.TrimPrefix(src.Annotations[controller.RemoteURLsAnnotation]+"\n"+remote, "\n")
		return c.Update(ctx, src)
	})
	if err != nil {
		t.Fatalf("vouch for remote %s on flux-system/scribe: %v", remote, err)
	}
}
