package render

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"path"
	"sort"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/internal/credurl"
)

// crValidator checks a custom resource the way the kube-apiserver does on
// create: unknown fields, OpenAPI schema, CEL rules, then defaults. Running
// the apiserver's own code keeps `scribe render` and the controller in
// agreement, byte for byte, on what a CR means.
type crValidator struct {
	name     string // "<crd> <version>", for errors
	internal *apiextensions.JSONSchemaProps

	// Built on first use: the CEL rules alone cost tens of milliseconds,
	// paid only by a process that decodes this kind.
	once       sync.Once
	err        error
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaCreateValidator
	cel        *cel.Validator
}

// build compiles the structural schema, the OpenAPI validator and the CEL
// rules of the version.
func (v *crValidator) build() error {
	v.once.Do(func() {
		s, err := structuralschema.NewStructural(v.internal)
		if err != nil {
			v.err = fmt.Errorf("structural schema of %s: %w", v.name, err)
			return
		}
		sv, _, err := apiservervalidation.NewSchemaValidator(v.internal)
		if err != nil {
			v.err = fmt.Errorf("schema validator of %s: %w", v.name, err)
			return
		}
		v.structural, v.schema = s, sv
		v.cel = cel.NewValidator(s, true, celconfig.PerCallLimit)
	})
	return v.err
}

// loadCRValidators reads every CRD in fsys (keyed by "group/version/Kind").
func loadCRValidators(fsys fs.FS) (map[string]*crValidator, error) {
	files, err := fs.Glob(fsys, "bases/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list CRDs: %w", err)
	}
	out := map[string]*crValidator{}
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("read CRD %s: %w", f, err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("decode CRD %s: %w", path.Base(f), err)
		}
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			var internal apiextensions.JSONSchemaProps
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
				return nil, fmt.Errorf("convert CRD %s %s: %w", crd.Name, v.Name, err)
			}
			out[crd.Spec.Group+"/"+v.Name+"/"+crd.Spec.Names.Kind] = &crValidator{name: crd.Name + " " + v.Name, internal: &internal}
		}
	}
	return out, nil
}

// validate applies the CRD's defaults to obj in place and reports unknown
// fields, schema and CEL violations.
func (v *crValidator) validate(ctx context.Context, obj map[string]any) []FieldError {
	if err := v.build(); err != nil {
		return []FieldError{{Message: err.Error()}}
	}
	var out []FieldError
	var errs field.ErrorList
	// Pruning on a copy tells which fields the apiserver would drop (or, with
	// strict field validation, reject); the render rejects them.
	clone := deepCopyJSON(obj)
	unknown := pruning.PruneWithOptions(clone, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	sort.Strings(unknown)
	for _, p := range unknown {
		out = append(out, FieldError{Path: p, Message: "unknown field"})
	}
	// Like the apiserver: defaults are applied when the object is decoded,
	// before schema validation and CEL rules run.
	defaulting.Default(obj, v.structural)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, v.schema)...)
	// Like the apiserver's strategy: items of set and map lists are unique.
	out = append(out, v.validateListSetsAndMaps(obj)...)
	if len(out) == 0 && len(errs) == 0 && v.cel != nil {
		celErrs, _ := v.cel.Validate(ctx, nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	for _, e := range errs {
		// A refused value is echoed in the message, as the apiserver does;
		// a URL's credentials never are.
		if v, ok := e.BadValue.(string); ok && credurl.Check(v) != nil {
			e.BadValue = credurl.Redact(v)
		}
		out = append(out, FieldError{Path: e.Field, Message: e.ErrorBody()})
	}
	// The OpenAPI validator reports in map order; sort for stable output.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Error() < out[j].Error() })
	return out
}

// deepCopyJSON copies a JSON-shaped value. Numbers come out as the API
// server decodes them: whole numbers as int64, others as float64, so an
// input decoded by encoding/json (every number a float64) validates and
// renders exactly as one read from the cluster.
func deepCopyJSON(v any) any {
	switch t := v.(type) {
	case float64:
		if t == math.Trunc(t) && t >= math.MinInt64 && t < math.MaxInt64 {
			return int64(t)
		}
		return t
	case float32:
		return deepCopyJSON(float64(t))
	case int:
		return int64(t)
	case int32:
		return int64(t)
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		if f, err := t.Float64(); err == nil {
			return f
		}
		return t.String()
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = deepCopyJSON(e)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = deepCopyJSON(e)
		}
		return s
	default:
		return v
	}
}
