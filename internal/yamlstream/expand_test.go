package yamlstream_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/yamlstream"
)

// aliasBomb is about 1 MB of YAML: each level is a list of the previous
// level's anchor repeated, padded with plain scalars so that aliases stay a
// small part of the nodes (under the alias-ratio checks).
func aliasBomb(levels, width, padding int) string {
	var b strings.Builder
	b.WriteString("l0: &l0 [" + strings.Repeat("xxxxxxxx,", width) + "x]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [", i, i)
		for range width {
			fmt.Fprintf(&b, "*l%d, ", i-1)
		}
		b.WriteString(strings.Repeat("p, ", padding) + "p]\n")
	}
	return b.String()
}

func TestCheckDecodedSizeRefusesAnAliasBomb(t *testing.T) {
	doc := aliasBomb(6, 20, 2000)
	if len(doc) > 1<<20 {
		t.Fatalf("the bomb is %d bytes, want at most 1 MiB", len(doc))
	}
	err := yamlstream.CheckDecodedSize([]byte(doc), yamlstream.MaxDecodedSize)
	if !errors.Is(err, yamlstream.ErrTooLarge) {
		t.Fatalf("CheckDecodedSize = %v, want ErrTooLarge", err)
	}
}

func TestCheckDecodedSizeAcceptsOrdinaryDocuments(t *testing.T) {
	for name, doc := range map[string]string{
		"no alias":          "a: 1\nb: [x, y]\n",
		"a few aliases":     "base: &b {image: nginx, port: 80}\nweb: *b\napi: *b\n",
		"star in a string":  "a: '*not an alias*'\n",
		"small alias chain": aliasBomb(2, 3, 0),
		"not YAML":          "a: *undefined\n",
	} {
		if err := yamlstream.CheckDecodedSize([]byte(doc), yamlstream.MaxDecodedSize); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCheckDecodedSizeCountsExpandedBytes(t *testing.T) {
	doc := "a: &a " + strings.Repeat("x", 1000) + "\nb: [*a, *a, *a, *a, *a]\n"
	if err := yamlstream.CheckDecodedSize([]byte(doc), 5000); !errors.Is(err, yamlstream.ErrTooLarge) {
		t.Errorf("six copies of 1000 bytes under a 5000-byte bound: %v", err)
	}
	if err := yamlstream.CheckDecodedSize([]byte(doc), 8000); err != nil {
		t.Errorf("six copies of 1000 bytes under an 8000-byte bound: %v", err)
	}
}
