package termtext

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLineEscapesEachAttack(t *testing.T) {
	for _, tc := range []struct {
		attack, in, want string
	}{
		{"plain text is kept", "v2 rolled back: errors 0.3 > 0.05", "v2 rolled back: errors 0.3 > 0.05"},
		{"non-ASCII letters are kept", "déploiement ✓ 版本", "déploiement ✓ 版本"},
		{"an escape sequence clearing the screen", "ok\x1b[2Jgone", `ok\x1b[2Jgone`},
		{"an OSC title change ended by BEL", "\x1b]0;pwned\x07", `\x1b]0;pwned\a`},
		{"a carriage return overwriting the line", "safe\rEVIL", `safe\rEVIL`},
		{"a newline adding a line or a table row", "v1\nv9  promoted", `v1\nv9  promoted`},
		{"a tab shifting table columns", "v1\tpromoted", `v1\tpromoted`},
		{"a backspace erasing what came before", "abc\b\b\bxyz", `abc\b\b\bxyz`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"a C1 CSI (U+009B) starting an escape sequence", "a\u009b31mred", `a\u009b31mred`},
		{"a C1 next line (U+0085)", "a\u0085b", `a\u0085b`},
		{"a right-to-left override reordering the text", "evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"every bidi embedding and override U+202A–U+202E", "\u202a\u202b\u202c\u202d\u202e", `\u202a\u202b\u202c\u202d\u202e`},
		{"every bidi isolate U+2066–U+2069", "\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`},
		{"a zero-width space hiding a difference", "admin\u200b", `admin\u200b`},
		{"a line separator (U+2028)", "a\u2028b", `a\u2028b`},
		{"a paragraph separator (U+2029)", "a\u2029b", `a\u2029b`},
		{"invalid UTF-8 bytes (a raw 8-bit CSI)", "a\x9b31m\xff", `a\x9b31m\xff`},
		{"a NUL byte", "a\x00b", `a\x00b`},
	} {
		t.Run(tc.attack, func(t *testing.T) {
			got := Line(tc.in)
			if got != tc.want {
				t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.want)
			}
			for _, r := range got {
				if Unsafe(r) {
					t.Errorf("Line(%q) still holds %U", tc.in, r)
				}
			}
			if Cell(tc.in) != got {
				t.Errorf("Cell(%q) = %q, want Line's %q", tc.in, Cell(tc.in), got)
			}
		})
	}
}

func TestCILineRefusesWorkflowCommands(t *testing.T) {
	for _, tc := range []struct {
		attack, in, want string
	}{
		{"ordinary text is kept", "removed: Workload shop/web", "removed: Workload shop/web"},
		{"a GitHub Actions ::error command", "::error::pwned", `\x3a:error::pwned`},
		{"a ::set-output command", "::set-output name=ok::true", `\x3a:set-output name=ok::true`},
		{"a command after spaces, which the runner trims", "   ::add-mask::x", `   \x3a:add-mask::x`},
		{"a command after a diff's context space and YAML indentation", "       ::stop-commands::t", `       \x3a:stop-commands::t`},
		{"a command after a non-breaking space", "\u00a0::warning::x", "\u00a0" + `\x3a:warning::x`},
		{"a command after a newline in tenant text", "reason\n::error::pwned", `reason\n::error::pwned`},
		{"a command after a carriage return", "ok\r::error::x", `ok\r::error::x`},
		{"a command behind a diff's + is no command", "+::error::x", "+::error::x"},
		{"an old ##[ command anywhere in the line", "text ##[set-output name=a;]b", `text ##\x5bset-output name=a;]b`},
		{"an Azure Pipelines ##vso[ command", "x ##vso[task.setvariable variable=a]b", `x ##vso\x5btask.setvariable variable=a]b`},
		{"##VSO[ in another case", "##VSO[task.complete]", `##VSO\x5btask.complete]`},
		{"a markdown heading is kept", "## Heading", "## Heading"},
		{"escape sequences too", "\x1b[31m::error::x", `\x1b[31m::error::x`},
	} {
		t.Run(tc.attack, func(t *testing.T) {
			got := CILine(tc.in)
			if got != tc.want {
				t.Errorf("CILine(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(got, "\u00a0")), "::") || strings.Contains(got, "##[") || strings.Contains(strings.ToLower(got), "##vso[") {
				t.Errorf("CILine(%q) = %q still reads as a workflow command", tc.in, got)
			}
		})
	}
}

func TestCITextKeepsLinesAndRefusesCommandsOnEach(t *testing.T) {
	in := "--- a/x.yaml\n+++ b/x.yaml\n@@ -1 +1 @@\n ::error::context\n-old\x1b[2J\n+new"
	want := "--- a/x.yaml\n+++ b/x.yaml\n@@ -1 +1 @@\n \\x3a:error::context\n-old\\x1b[2J\n+new"
	if got := CIText(in); got != want {
		t.Errorf("CIText:\n got %q\nwant %q", got, want)
	}
}

func TestJSONEscapesWhatTheEncoderLeavesRawLosslessly(t *testing.T) {
	for _, tc := range []struct {
		attack, in string
	}{
		{"a C1 CSI", "a\u009b31m"},
		{"DEL", "a\x7f"},
		{"a right-to-left override", "evil\u202etxt"},
		{"a bidi isolate", "\u2066x\u2069"},
		{"a format character above U+FFFF (a tag)", "flag\U000E0041"},
		{"an ESC, which the encoder escapes itself", "\x1b[2J"},
		{"a newline", "a\nb"},
	} {
		t.Run(tc.attack, func(t *testing.T) {
			raw, err := json.MarshalIndent(map[string]string{"reason": tc.in}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			out := JSON(raw)
			for _, r := range string(out) {
				if Unsafe(r) && r != '\n' {
					t.Errorf("JSON output holds %U: %q", r, out)
				}
			}
			var back map[string]string
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if back["reason"] != tc.in {
				t.Errorf("decodes to %q, want %q", back["reason"], tc.in)
			}
		})
	}
}
