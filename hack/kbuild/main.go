// Command kbuild prints `kustomize build DIR` with the kustomize Go API that
// is already in go.mod, so neither kustomize nor kubectl is needed to
// render config/. The Makefile pipes it into `kubectl apply -f -`.
//
//	go run ./hack/kbuild [-image scribe=registry.example/scribe:v1.2.3] config/default
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

func main() {
	image := flag.String("image", "", "override an image, as NAME=IMAGE[:TAG][@DIGEST] (kustomize edit set image)")
	flag.Usage = func() {
		_, _ = fmt.Fprintln(flag.CommandLine.Output(), "usage: kbuild [-image NAME=IMAGE] DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(os.Stdout, flag.Arg(0), *image); err != nil {
		fmt.Fprintln(os.Stderr, "kbuild:", err)
		os.Exit(1)
	}
}

// run writes the kustomize build of dir to w, with image applied if set.
func run(w io.Writer, dir, image string) error {
	out, err := Build(dir, image)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// Build returns the kustomize build of dir as multi-document YAML. A
// non-empty image ("name=ref") is set through a throwaway overlay, as
// `kustomize edit set image` would.
func Build(dir, image string) ([]byte, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root := abs
	if image != "" {
		img, err := ParseImage(image)
		if err != nil {
			return nil, err
		}
		overlay, err := os.MkdirTemp("", "kbuild-")
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(overlay) }()
		// kustomize refuses absolute roots; a relative path may leave the
		// overlay's directory.
		rel, err := filepath.Rel(overlay, abs)
		if err != nil {
			return nil, err
		}
		k := types.Kustomization{
			TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
			Resources: []string{filepath.ToSlash(rel)},
			Images:    []types.Image{img},
		}
		data, err := yaml.Marshal(k)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), data, 0o600); err != nil {
			return nil, err
		}
		root = overlay
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), root)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return res.AsYaml()
}

// ParseImage parses "name=repo[:tag][@digest]". A colon after the last
// slash starts the tag, so a registry port ("localhost:5000/scribe") is not
// mistaken for one.
func ParseImage(s string) (types.Image, error) {
	name, ref, ok := strings.Cut(s, "=")
	if !ok || name == "" || ref == "" {
		return types.Image{}, fmt.Errorf("-image %q: want NAME=IMAGE[:TAG][@DIGEST]", s)
	}
	img := types.Image{Name: name}
	if repo, digest, ok := strings.Cut(ref, "@"); ok {
		if digest == "" {
			return types.Image{}, errors.New("-image " + s + ": empty digest")
		}
		ref, img.Digest = repo, digest
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref, img.NewTag = ref[:i], ref[i+1:]
		if img.NewTag == "" {
			return types.Image{}, errors.New("-image " + s + ": empty tag")
		}
	}
	if ref == "" {
		return types.Image{}, errors.New("-image " + s + ": empty image name")
	}
	img.NewName = ref
	return img, nil
}
