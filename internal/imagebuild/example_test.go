package imagebuild_test

import (
	"context"
	"fmt"
	"os"

	"github.com/scribe-gitops/scribe/internal/imagebuild"
)

// Push Scribe's and the demo app's images into a test registry on
// 127.0.0.1 (such as the e2e loop's, go-containerregistry's pkg/registry
// behind httptest), then name them by digest in the manifests.
func ExampleBuild() {
	ctx := context.Background()
	registry := "127.0.0.1:5000" // the loop's Stack.Registry
	for _, app := range []imagebuild.App{imagebuild.Scribe(), imagebuild.DemoApp()} {
		res, err := imagebuild.Build(ctx, imagebuild.Options{
			App:        app,
			ModuleRoot: "../..", // the repository's root (go.mod)
			Version:    "v2",    // the demo app answers it on GET /
			Push:       registry + "/" + app.Name + ":v2",
			Log:        os.Stderr,
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res.Pushed) // 127.0.0.1:5000/demo-app@sha256:…
	}
}
