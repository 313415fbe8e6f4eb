// Package crd embeds the CustomResourceDefinitions that controller-gen
// generates from api/v1alpha1, so the offline render validates and defaults
// custom resources exactly as the kube-apiserver does.
package crd

import "embed"

// Bases holds bases/*.yaml.
//
//go:embed bases/*.yaml
var Bases embed.FS
