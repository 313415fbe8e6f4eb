package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

func decodeWithEncodingJSON(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	err := dec.Decode(&m)
	return m, err
}

// jsonCases are texts decodeObject must decode as encoding/json does,
// errors included.
var jsonCases = []string{
	`{}`,
	` { "a" : [ 1 , -2.5e+3 , 0 , -0 , 1E7 , true , false , null , "" , {} , [] ] } `,
	`{"s":"plain","u":"é","e":"a\"b\\c\/d\n\t\u003c\u00e9\ud83d\ude00","bad":"\ud800x"}`,
	`{"a":1,"a":2}`,
	`{"n":01}`,
	`{"n":1.}`,
	`{"n":-}`,
	`{"n":.5}`,
	`{"t":tru}`,
	`{"t":truex}`,
	`{"a":1}{"b":2}`,
	`{"a":1} x`,
	`[1]`,
	`null`,
	`"s"`,
	`{"a":1`,
	`{"a" 1}`,
	`{"a":1,}`,
	`{"ctl":"a` + "\x01" + `b"}`,
	`{"invalid utf8":"` + "\xff" + `"}`,
	``,
}

func TestDecodeObjectIsEncodingJSONs(t *testing.T) {
	for _, text := range jsonCases {
		got, gotErr := decodeObject([]byte(text))
		want, wantErr := decodeWithEncodingJSON([]byte(text))
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %#v, %v; want %#v, %v", text, got, gotErr, want, wantErr)
		}
	}
	for f, obj := range goldenObjects(t) {
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeObject(raw)
		if err != nil || !reflect.DeepEqual(got, obj) {
			t.Errorf("%s: got %v (%v), want %v", f, got, err, obj)
		}
	}
}

func FuzzDecodeObject(f *testing.F) {
	for _, text := range jsonCases {
		f.Add([]byte(text))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		got, gotErr := decodeObject(text)
		want, wantErr := decodeWithEncodingJSON(text)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %#v, %v; want %#v, %v", text, got, gotErr, want, wantErr)
		}
	})
}
