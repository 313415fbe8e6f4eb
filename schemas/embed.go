// Package schemas embeds the CUE definitions of every kind Scribe renders:
// generated from k8s.io/api and Scribe's own render contract (`cue get go`,
// `make generate`) and from the upstream CRDs that internal/crds finds
// (`cue get crd`) by `make schemas`, plus hand-written
// *_handwritten.cue files for kinds without a usable upstream CRD. The render
// mounts this tree as the CUE module's cue.mod/gen.
package schemas

import "embed"

// FS holds the schema tree, one directory per import path.
//
//go:embed k8s.io *.io *.sh github.com
var FS embed.FS
