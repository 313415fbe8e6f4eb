package render

import "testing"

// The CR validators are built on first use; every embedded CRD version
// must build.
func TestCRValidatorsBuild(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if len(e.validators) == 0 {
		t.Fatal("no CR validators")
	}
	for k, v := range e.validators {
		if err := v.build(); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
}
