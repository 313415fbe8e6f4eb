package gitsink

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/scribe-gitops/scribe/internal/textcut"
)

// MaxProposalBody is the most bytes a pull request body holds: GitHub
// refuses bodies over 65536 characters, GitLab and Gitea take more; the
// margin leaves room for a forge's own additions.
const MaxProposalBody = 60000

// WeightsFunc reads how a changed object's traffic weights moved between
// two versions of its YAML document, one line per backend ("web-v1 90 →
// 50"); nil when the object carries none. The controller supplies it (the
// Workload's route knowledge lives there), so the sink knows no particular
// kind of object.
type WeightsFunc func(before, after []byte) []string

// ObjectChange is one rendered object a proposal adds, changes or
// removes.
type ObjectChange struct {
	// Op is "added", "changed" or "removed".
	Op string
	// Kind, Namespace and Name identify the object.
	Kind, Namespace, Name string
	// File is the repository path of the file holding it.
	File string
	// Weights are lines saying how the object's traffic weights moved,
	// "web-v1 90 → 50", as PullRequestOptions.Weights read them from its
	// two versions; the sink knows no particular kind of object.
	Weights []string
}

// ProposalBody is what a pull request says; Markdown renders it.
type ProposalBody struct {
	// Object is the custom resource ("Workload team-a/web"), Generation
	// its rendered generation, Base the branch the change goes into.
	Object     string
	Generation int64
	Base       string
	// Summary is the intent in a sentence or two (publish.Change.Summary, else
	// publish.Change.Reason).
	Summary string
	// Dir is the custom resource's folder in the repository.
	Dir string
	// Digest of the rendered bundle.
	Digest string
	// Objects are the rendered changes.
	Objects []ObjectChange
	// Evidence is what the previous step showed.
	Evidence string
	// Namespace, Kind and Name give the kubectl commands that show the
	// custom resource.
	Namespace, Kind, Name string
}

// String is the body in Markdown, at most MaxProposalBody bytes: the
// object table and then the evidence are cut, saying so, when it would
// not fit.
func (p ProposalBody) String() string {
	body := p.render(len(p.Objects), p.Evidence)
	if len(body) <= MaxProposalBody {
		return body
	}
	rows := len(p.Objects)
	for rows > 20 && len(p.render(rows, p.Evidence)) > MaxProposalBody {
		rows /= 2
	}
	body = p.render(rows, p.Evidence)
	if over := len(body) - MaxProposalBody; over > 0 {
		const note = "\n… (cut to fit the pull request; the full evidence is in the custom resource's status)"
		body = p.render(rows, textcut.Prefix(p.Evidence, len(p.Evidence)-over-len(note))+note)
	}
	return body
}

func (p ProposalBody) render(rows int, evidence string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Scribe proposes a change to **%s** (generation %d) on %s.\n", mdText(p.Object), p.Generation, mdCode(p.Base))
	if s := strings.TrimSpace(p.Summary); s != "" {
		b.WriteString("\n" + s + "\n")
	}
	var added, changed, removed int
	for _, o := range p.Objects {
		switch o.Op {
		case "added":
			added++
		case "changed":
			changed++
		default:
			removed++
		}
	}
	fmt.Fprintf(&b, "\n### Rendered changes\n\n%d added, %d changed, %d removed in %s", added, changed, removed, mdCode(p.Dir+"/"))
	if p.Digest != "" {
		fmt.Fprintf(&b, " (digest %s)", mdCode(p.Digest))
	}
	b.WriteString(".\n")
	var weights []string
	for _, o := range p.Objects {
		for _, w := range o.Weights {
			weights = append(weights, fmt.Sprintf("- %s %s: %s", mdText(o.Kind), mdText(o.Name), mdText(w)))
		}
	}
	if len(weights) > 0 {
		b.WriteString("\nWeights:\n\n" + strings.Join(weights, "\n") + "\n")
	}
	if len(p.Objects) > 0 {
		b.WriteString("\n| change | object | file |\n| --- | --- | --- |\n")
		for _, o := range p.Objects[:rows] {
			id := o.Kind + " " + o.Name
			if o.Namespace != "" {
				id = o.Kind + " " + o.Namespace + "/" + o.Name
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", o.Op, mdCell(mdCode(id)), mdCell(mdCode(o.File)))
		}
		if rows < len(p.Objects) {
			fmt.Fprintf(&b, "| … | %d more | |\n", len(p.Objects)-rows)
		}
	}
	b.WriteString("\n### Evidence of the previous step\n\n")
	if strings.TrimSpace(evidence) == "" {
		b.WriteString("_none yet: this is the first step_\n")
	} else {
		b.WriteString(mdBlock(strings.TrimRight(evidence, "\n")))
	}
	kind := strings.ToLower(p.Kind)
	fmt.Fprintf(&b, "\n### The custom resource\n\n```sh\nkubectl -n %s get %s %s -o yaml\nkubectl -n %s events --for %s/%s\n```\n", p.Namespace, kind, p.Name, p.Namespace, kind, p.Name)
	b.WriteString("\n<!-- scribe: " + p.Object + " -->\n")
	return b.String()
}

// objectDiff lists the rendered objects below dir (and in dir.sync.yaml)
// that differ between two trees, by identity: a file's documents are
// parsed, so a moved or reformatted object is "changed" only when its
// content changed.
func objectDiff(st *gitStore, objs *memory.ObjectStorage, oldTree, newTree plumbing.Hash, dir string, weights WeightsFunc) ([]ObjectChange, error) {
	src := layeredStorer{EncodedObjectStorer: st.repo.Storer, overlay: objs}
	before, err := renderedObjects(src, oldTree, dir)
	if err != nil {
		return nil, err
	}
	after, err := renderedObjects(src, newTree, dir)
	if err != nil {
		return nil, err
	}
	var out []ObjectChange
	for id, a := range after {
		b, ok := before[id]
		switch {
		case !ok:
			out = append(out, ObjectChange{Op: "added", Kind: id.kind, Namespace: id.namespace, Name: id.name, File: a.file})
		case !bytes.Equal(a.doc, b.doc):
			o := ObjectChange{Op: "changed", Kind: id.kind, Namespace: id.namespace, Name: id.name, File: a.file}
			if weights != nil {
				o.Weights = weights(b.doc, a.doc)
			}
			out = append(out, o)
		}
	}
	for id, b := range before {
		if _, ok := after[id]; !ok {
			out = append(out, ObjectChange{Op: "removed", Kind: id.kind, Namespace: id.namespace, Name: id.name, File: b.file})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Kind+"/"+out[i].Name < out[j].Kind+"/"+out[j].Name
	})
	return out, nil
}

type renderedKey struct{ kind, namespace, name string }

type renderedDoc struct {
	file string
	doc  []byte
}

// renderedObjects reads the Kubernetes objects of the files below dir and
// of dir.sync.yaml in root, by identity. Files that hold no object
// (kustomization.yaml, .scribe.json) are left out.
func renderedObjects(src layeredStorer, root plumbing.Hash, dir string) (map[renderedKey]renderedDoc, error) {
	objs, err := treeObjects(src, root, []string{dir + ".sync.yaml", dir}, func(file string) bool {
		base := path.Base(file)
		return base != "kustomization.yaml" && base != ".scribe.json"
	}, 16<<20)
	if err != nil {
		return nil, err
	}
	out := map[renderedKey]renderedDoc{}
	for _, o := range objs {
		if o.Kind != "" && o.Name != "" {
			out[renderedKey{o.Kind, o.Namespace, o.Name}] = renderedDoc{file: o.File, doc: o.Doc}
		}
	}
	return out, nil
}
