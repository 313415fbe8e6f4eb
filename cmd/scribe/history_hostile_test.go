package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// objectWriter writes Git objects straight into a repository's storage,
// so a test builds thousands of commits without a worktree.
type objectWriter struct {
	t    *testing.T
	st   storer.EncodedObjectStorer
	when time.Time
}

func newObjectWriter(t *testing.T, dir string) (*objectWriter, *git.Repository) {
	t.Helper()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return &objectWriter{t: t, st: repo.Storer, when: t0}, repo
}

func (w *objectWriter) put(o interface {
	Encode(plumbing.EncodedObject) error
}) plumbing.Hash {
	w.t.Helper()
	obj := w.st.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		w.t.Fatal(err)
	}
	h, err := w.st.SetEncodedObject(obj)
	if err != nil {
		w.t.Fatal(err)
	}
	return h
}

func (w *objectWriter) blob(data []byte) plumbing.Hash {
	w.t.Helper()
	obj := w.st.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	ow, err := obj.Writer()
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := ow.Write(data); err != nil {
		w.t.Fatal(err)
	}
	if err := ow.Close(); err != nil {
		w.t.Fatal(err)
	}
	h, err := w.st.SetEncodedObject(obj)
	if err != nil {
		w.t.Fatal(err)
	}
	return h
}

// tree writes the tree holding files (slash paths) below the root.
func (w *objectWriter) tree(files map[string]plumbing.Hash) plumbing.Hash {
	w.t.Helper()
	type node struct {
		files map[string]plumbing.Hash
		dirs  map[string]*node
	}
	newNode := func() *node { return &node{files: map[string]plumbing.Hash{}, dirs: map[string]*node{}} }
	root := newNode()
	for p, h := range files {
		n := root
		parts := strings.Split(p, "/")
		for _, d := range parts[:len(parts)-1] {
			if n.dirs[d] == nil {
				n.dirs[d] = newNode()
			}
			n = n.dirs[d]
		}
		n.files[parts[len(parts)-1]] = h
	}
	var write func(n *node) plumbing.Hash
	write = func(n *node) plumbing.Hash {
		var tr object.Tree
		for name, h := range n.files {
			tr.Entries = append(tr.Entries, object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: h})
		}
		for name, d := range n.dirs {
			tr.Entries = append(tr.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: write(d)})
		}
		sortTreeEntries(tr.Entries)
		return w.put(&tr)
	}
	return write(root)
}

// sortTreeEntries orders entries as Git does (a directory as if its name
// ended with "/").
func sortTreeEntries(es []object.TreeEntry) {
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && key(es[j]) < key(es[j-1]); j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// commit writes a commit of tree with message and parents, a minute
// after the previous one.
func (w *objectWriter) commit(message string, tree plumbing.Hash, parents ...plumbing.Hash) plumbing.Hash {
	w.when = w.when.Add(time.Minute)
	sig := object.Signature{Name: "Scribe", Email: "scribe@scribe.dev", When: w.when}
	return w.put(&object.Commit{Author: sig, Committer: sig, Message: message, TreeHash: tree, ParentHashes: parents})
}

func (w *objectWriter) branch(repo *git.Repository, name string, h plumbing.Hash) {
	w.t.Helper()
	if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName(name), h)); err != nil {
		w.t.Fatal(err)
	}
}

// scribeMessage is Scribe's commit message for shop/checkout.
func scribeMessage(body string, gen int) string {
	msg := "scribe: update Workload shop/checkout\n\n"
	if body != "" {
		msg += body + "\n\n"
	}
	return msg + fmt.Sprintf("Scribe-Object: Workload/shop/checkout\nScribe-Generation: %d\nScribe-Digest: sha256:%064d\n", gen, gen)
}

const checkoutDir = "clusters/shop/workload/checkout/"

// routeYAML is the HTTPRoute of shop/checkout splitting traffic as vw.
func routeYAML(vw ...any) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: checkout\n  namespace: shop\nspec:\n  rules:\n  - backendRefs:\n")
	for _, v := range split(vw...) {
		fmt.Fprintf(&b, "    - kind: Service\n      name: checkout-%s\n      port: 80\n      weight: %d\n", v.Version, v.Weight)
	}
	return []byte(b.String())
}

// mergedBranchesRepo is a repository whose main branch and a pull
// request branch each hold n of Scribe's commits of shop/checkout since
// their fork, the branch merged into main by pull request #7. It returns
// the directory and the branch's commits.
func mergedBranchesRepo(t *testing.T, n int) (string, map[plumbing.Hash]bool) {
	t.Helper()
	dir := t.TempDir()
	w, repo := newObjectWriter(t, dir)
	tree := w.tree(map[string]plumbing.Hash{checkoutDir + "httproute-checkout.yaml": w.blob(routeYAML("v1", 100))})
	root := w.commit(scribeMessage("", 1), tree)
	mainTip, branchTip := root, root
	onBranch := map[plumbing.Hash]bool{}
	for i := range n {
		mainTip = w.commit(scribeMessage("", 2+i), tree, mainTip)
		branchTip = w.commit(scribeMessage("", 2+i), tree, branchTip)
		onBranch[branchTip] = true
	}
	merge := w.commit("Merge pull request #7 from acme/feature\n", tree, mainTip, branchTip)
	w.branch(repo, "main", merge)
	return dir, onBranch
}

// TestHistoryWalksMergedBranchesOnce: 1,000 commits on main and 1,000 on
// a merged pull request branch are each read once, and the pull request
// is attributed to exactly the branch's commits by one linear walk
// (before, each branch commit asked whether it was an ancestor of main's
// side, a walk of its own: quadratic). The command completes within go
// test's -timeout; the test counts commits read, not time.
func TestHistoryWalksMergedBranchesOnce(t *testing.T) {
	const n = 1000
	dir, onBranch := mergedBranchesRepo(t, n)
	var out, errOut bytes.Buffer
	args := []string{"history", "workload", "checkout", "-n", "shop", "--git", dir, "--branch", "main", "--path", "clusters", "-o", "json"}
	if code := run(context.Background(), args, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if errOut.Len() > 0 {
		t.Errorf("warnings on a sound repository:\n%s", errOut.String())
	}

	repo, err := openBounded(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	tip, err := historyTip(repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	walk := newHistoryWalk(repo.Storer, defaultHistoryMaxCommits, checkoutID)
	all, err := walk.commits(context.Background(), tip)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2*n + 2; walk.loaded != want || len(all) != want {
		t.Errorf("read %d commit objects and walked %d commits, want %d each (each once)", walk.loaded, len(all), want)
	}
	prs := pullRequests(all)
	for _, c := range all {
		if got, want := prs[c.hash], map[bool]int{true: 7}[onBranch[c.hash]]; got != want {
			t.Errorf("commit %s (on the branch: %v): pull request %d, want %d", c.hash, onBranch[c.hash], got, want)
		}
	}
}

var checkoutID = scribev1.ObjectIdentity{Kind: scribev1.WorkloadKind, Namespace: "shop", Name: "checkout"}
