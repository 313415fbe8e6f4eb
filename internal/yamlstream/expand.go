package yamlstream

import (
	"bytes"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// MaxDecodedSize is the most bytes one document may amount to once its
// aliases are expanded: a decoder copies an aliased node at every alias,
// so a small document mixing aliases with plain scalars (which keeps it
// under the YAML libraries' alias-ratio checks) can expand to gigabytes.
const MaxDecodedSize = 16 << 20

// nodeOverhead is what each node is counted for beyond its text.
const nodeOverhead = 8

// ErrTooLarge is wrapped by CheckDecodedSize's error.
var ErrTooLarge = errors.New("expands beyond the decoded size bound")

// CheckDecodedSize refuses a document that would expand to more than limit
// bytes (counted as its scalars' text plus a few bytes a node) when its
// aliases are expanded. It parses the document without expanding
// anything, so its cost follows the document's own size; a document with
// no alias at all is not parsed. A document that does not parse is left
// to the decoder to report.
func CheckDecodedSize(doc []byte, limit int64) error {
	if bytes.IndexByte(doc, '*') < 0 {
		return nil // no alias: the decoded size follows the text's
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	s := &sizer{limit: limit, memo: map[*yaml.Node]int64{}, open: map[*yaml.Node]bool{}}
	var total int64
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			return nil // io.EOF, or not YAML: the decoder says so
		}
		size, err := s.size(&n)
		if err != nil {
			return err
		}
		total += size
		if total > limit {
			return fmt.Errorf("%w of %d bytes", ErrTooLarge, limit)
		}
	}
}

type sizer struct {
	limit int64
	memo  map[*yaml.Node]int64
	open  map[*yaml.Node]bool
}

func (s *sizer) size(n *yaml.Node) (int64, error) {
	if n == nil {
		return 0, nil
	}
	if v, ok := s.memo[n]; ok {
		return v, nil
	}
	if s.open[n] {
		return 0, errors.New("an alias refers to a node that contains it")
	}
	s.open[n] = true
	defer delete(s.open, n)
	total := nodeOverhead + int64(len(n.Value))
	if n.Kind == yaml.AliasNode {
		v, err := s.size(n.Alias)
		if err != nil {
			return 0, err
		}
		total += v
	}
	for _, c := range n.Content {
		v, err := s.size(c)
		if err != nil {
			return 0, err
		}
		total += v
		if total > s.limit {
			return 0, fmt.Errorf("%w of %d bytes", ErrTooLarge, s.limit)
		}
	}
	if total > s.limit {
		return 0, fmt.Errorf("%w of %d bytes", ErrTooLarge, s.limit)
	}
	s.memo[n] = total
	return total, nil
}
