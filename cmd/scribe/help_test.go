package main

import (
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// TestEveryCommandHasExamplesThatRunIt: every visible command has an
// Example, and each of its command lines runs that command.
func TestEveryCommandHasExamplesThatRunIt(t *testing.T) {
	root := newRootCmd()
	var commands []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.Hidden {
			commands = append(commands, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if len(commands) < 8 {
		t.Fatalf("found %d commands, want every command", len(commands))
	}
	for _, c := range commands {
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no Example", c.CommandPath())
			continue
		}
		lines := strings.Split(c.Example, "\n")
		for i, line := range lines {
			line = strings.TrimSpace(line)
			continued := i > 0 && strings.HasSuffix(lines[i-1], `\`)
			if line == "" || strings.HasPrefix(line, "#") || continued {
				continue
			}
			if !strings.Contains(line, c.CommandPath()) {
				t.Errorf("%s: example %q does not run it", c.CommandPath(), line)
			}
		}
	}
}

// TestControllerHelpNamesEveryKindOfTheAPI: controller --help names each
// kind of Scribe's API the controller's scheme knows.
func TestControllerHelpNamesEveryKindOfTheAPI(t *testing.T) {
	scheme, err := controller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for kind := range scheme.KnownTypes(scribev1.GroupVersion) {
		if !strings.HasSuffix(kind, "List") && kind != "WatchEvent" && !strings.HasSuffix(kind, "Options") && kind != "Status" {
			kinds = append(kinds, kind)
		}
	}
	sort.Strings(kinds)
	if len(kinds) < 5 {
		t.Fatalf("kinds of the API: %v", kinds)
	}
	code, stdout, stderr := scribe(t, "controller", "--help")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, kind := range kinds {
		if !strings.Contains(stdout, kind) {
			t.Errorf("controller --help does not name %s:\n%s", kind, stdout)
		}
	}
}
