package render

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// Writing the embedded checks file (schemachecks_file.go reads it): run by
// `make generate` through TestEmbeddedSchemaChecks -update, and by the
// tests, never in a render, so no binary carries it.

// encodeSchemaChecks writes the compiled checks of every kind; it fails on
// a schema with an untranslated subtree.
func encodeSchemaChecks(schemas map[string]*compiledSchema) ([]byte, error) {
	enc := &checksEncoder{byKey: map[string]int{}, byPtr: map[*schemaNode]int{}, visiting: map[*schemaNode]bool{}}
	f := checksFile{Version: schemaChecksVersion, Kinds: map[string]int{}}
	kinds := make([]string, 0, len(schemas))
	for k := range schemas {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		cs := schemas[k]
		if len(cs.untranslated) > 0 {
			return nil, fmt.Errorf("%s: the compiler cannot translate %v", k, cs.untranslated)
		}
		r, err := enc.ref(cs.root)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		f.Kinds[k] = r
	}
	f.Nodes = enc.nodes
	// One node a line, for a readable diff of the uncompressed file.
	var b bytes.Buffer
	b.WriteString("{\"version\":" + strconv.Itoa(f.Version) + ",\n\"kinds\":")
	kj, err := json.Marshal(f.Kinds)
	if err != nil {
		return nil, err
	}
	b.Write(kj)
	b.WriteString(",\n\"nodes\":[")
	for i, n := range f.Nodes {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
		nj, err := json.Marshal(n)
		if err != nil {
			return nil, err
		}
		b.Write(nj)
	}
	b.WriteString("\n]}\n")
	return b.Bytes(), nil
}

// gzipSchemaChecks compresses the encoded checks for embedding.
func gzipSchemaChecks(data []byte) ([]byte, error) {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

type checksEncoder struct {
	nodes    []nodeRec
	byKey    map[string]int // encoded node -> ref: identical subtrees are one node
	byPtr    map[*schemaNode]int
	visiting map[*schemaNode]bool
}

func (enc *checksEncoder) refs(ns []*schemaNode) ([]int, error) {
	var out []int
	for _, n := range ns {
		r, err := enc.ref(n)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ref encodes n (children first) and returns its index.
func (enc *checksEncoder) ref(n *schemaNode) (int, error) {
	if n == nil {
		return 0, nil
	}
	if r, ok := enc.byPtr[n]; ok {
		return r, nil
	}
	if enc.visiting[n] {
		return 0, fmt.Errorf("a schema node refers to itself")
	}
	enc.visiting[n] = true
	defer delete(enc.visiting, n)
	if n.untranslated != "" {
		return 0, fmt.Errorf("untranslated subtree: %s", n.untranslated)
	}
	rec := nodeRec{Kinds: n.kinds, Req: n.required, Reg: n.regular, Closed: n.closed, MinF: n.minFields, List: n.isList, MinI: n.minItems, Never: n.never}
	var err error
	for _, c := range n.checks {
		cr, err := encodeCheck(c)
		if err != nil {
			return 0, err
		}
		rec.Checks = append(rec.Checks, cr)
	}
	if rec.AnyOf, err = enc.refs(n.anyOf); err != nil {
		return 0, err
	}
	if rec.AllOf, err = enc.refs(n.allOf); err != nil {
		return 0, err
	}
	if n.fields != nil {
		rec.Struct = true
		names := make([]string, 0, len(n.fields))
		for name := range n.fields {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			r, err := enc.ref(n.fields[name].node)
			if err != nil {
				return 0, err
			}
			if rec.Fields == nil {
				rec.Fields = map[string]int{}
			}
			rec.Fields[name] = r
		}
	}
	if rec.Pat, err = enc.ref(n.pattern); err != nil {
		return 0, err
	}
	if n.maxFields >= 0 {
		rec.MaxF = &n.maxFields
	}
	if rec.Prefix, err = enc.refs(n.prefix); err != nil {
		return 0, err
	}
	if rec.Elem, err = enc.ref(n.elem); err != nil {
		return 0, err
	}
	if n.maxItems >= 0 {
		rec.MaxI = &n.maxItems
	}
	if n.matchN != nil {
		m := &matchNRec{Src: n.matchN.src}
		if m.Count, err = enc.ref(n.matchN.count); err != nil {
			return 0, err
		}
		if m.Schemas, err = enc.refs(n.matchN.schemas); err != nil {
			return 0, err
		}
		rec.MatchN = m
	}
	key, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	r, ok := enc.byKey[string(key)]
	if !ok {
		enc.nodes = append(enc.nodes, rec)
		r = len(enc.nodes)
		enc.byKey[string(key)] = r
	}
	enc.byPtr[n] = r
	return r, nil
}

func encodeLit(l literal) *litRec {
	r := &litRec{Kind: l.kind, S: l.s}
	if l.kind == kindFloat {
		r.F = l.f
	}
	return r
}

func encodeCheck(c scalarCheck) (checkRec, error) {
	switch c := c.(type) {
	case literal:
		return checkRec{T: "lit", Lit: encodeLit(c)}, nil
	case boundCheck:
		op, ok := boundOps[c.op]
		if !ok {
			return checkRec{}, fmt.Errorf("bound operator %v", c.op)
		}
		return checkRec{T: "bound", Op: op, Lit: encodeLit(c.lit), Src: c.src}, nil
	case regexCheck:
		return checkRec{T: "regexp", Re: c.re.String(), Neg: c.neg, Src: c.src}, nil
	case runesCheck:
		return checkRec{T: "runes", N: c.n, Max: c.max}, nil
	case timeCheck:
		return checkRec{T: "time"}, nil
	case absURLCheck:
		return checkRec{T: "absURL"}, nil
	case base64Check:
		return checkRec{T: "base64"}, nil
	}
	return checkRec{}, fmt.Errorf("scalar check %T", c)
}
