package main

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/termtext"
	"github.com/scribe-gitops/scribe/internal/yamlstream"
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

// zerosObject writes a loose object declaring a blob of size bytes of
// zeros, about size/800 bytes on disk, under a made-up name (Git does not
// check a loose object's name against its content when reading it). It
// repeats one compressed block of 1 MiB of zeros, so a 1 GiB object takes
// milliseconds to write.
func zerosObject(t *testing.T, dir string, size int64) plumbing.Hash {
	t.Helper()
	const mib = 1 << 20
	if size%mib != 0 || size < 4*mib {
		t.Fatalf("size %d: want a multiple of 1 MiB, at least 4 MiB", size)
	}
	header := fmt.Sprintf("blob %d\x00", size)
	var out bytes.Buffer
	zw, err := zlib.NewWriterLevel(&out, zlib.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write([]byte(header)); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, mib)
	var ends []int
	for range 4 {
		if _, err := zw.Write(chunk); err != nil {
			t.Fatal(err)
		}
		if err := zw.Flush(); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, out.Len())
	}
	flushed := bytes.Clone(out.Bytes())
	block := flushed[ends[2]:ends[3]]
	if !bytes.Equal(block, flushed[ends[1]:ends[2]]) {
		t.Fatal("zlib does not compress 1 MiB of zeros the same way twice")
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	final := out.Bytes()[ends[3] : out.Len()-4] // the last block, without the checksum
	obj := bytes.NewBuffer(flushed)
	for range size/mib - 4 {
		obj.Write(block)
	}
	obj.Write(final)
	// Adler-32 of the header then size zeros: zeros add nothing to A and A
	// to B each.
	a, b := uint64(1), uint64(0)
	for _, c := range []byte(header) {
		a = (a + uint64(c)) % 65521
		b = (b + a) % 65521
	}
	b = (b + uint64(size)%65521*a) % 65521
	obj.Write([]byte{byte(b >> 8), byte(b), byte(a >> 8), byte(a)})

	h := plumbing.NewHash(fmt.Sprintf("%040x", size))
	p := filepath.Join(dir, ".git", "objects", h.String()[:2], h.String()[2:])
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, obj.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	return h
}

// aliasBombYAML is a few kilobytes of YAML whose aliases expand to about
// 10^8 nodes.
func aliasBombYAML() []byte {
	var b strings.Builder
	b.WriteString("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: checkout}\nl0: &l0 [" + strings.Repeat("xxxxxxxx,", 10) + "x]\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [", i, i)
		for range 10 {
			fmt.Fprintf(&b, "*l%d, ", i-1)
		}
		b.WriteString(strings.Repeat("p, ", 200) + "p]\n")
	}
	return []byte(b.String())
}

// TestHistorySkipsWhatItCannotReadAndShowsTheRest: a hostile repository
// whose commits hold a 1 GiB blob stored in about 1 MB, a YAML alias bomb,
// a file that is not YAML, a tree that is missing and a parent that is
// missing: each such commit is skipped with a warning naming it and why,
// nothing is inflated past its bound, and the rollouts of the other
// commits are printed (exit 0).
func TestHistorySkipsWhatItCannotReadAndShowsTheRest(t *testing.T) {
	dir := t.TempDir()
	w, repo := newObjectWriter(t, dir)
	route := func(data []byte) plumbing.Hash {
		return w.tree(map[string]plumbing.Hash{checkoutDir + "httproute-checkout.yaml": w.blob(data)})
	}
	bomb := zerosObject(t, dir, 1<<30)
	first := w.commit(scribeMessage("", 1), route(routeYAML("v1", 100)))
	inflating := w.commit(scribeMessage("", 2), w.tree(map[string]plumbing.Hash{checkoutDir + "httproute-checkout.yaml": bomb}), first)
	aliases := w.commit(scribeMessage("", 3), route(aliasBombYAML()), inflating)
	notYAML := w.commit(scribeMessage("", 4), route([]byte("spec: [unclosed\n")), aliases)
	noTree := w.commit(scribeMessage("", 5), plumbing.NewHash(strings.Repeat("ab", 20)), notYAML)
	missing := plumbing.NewHash(strings.Repeat("cd", 20))
	merge := w.commit("Merge pull request #9 from acme/gone\n", route(routeYAML("v1", 100)), noTree, missing)
	last := w.commit(scribeMessage("", 6), route(routeYAML("v1", 90, "v2", 10)), merge)
	w.branch(repo, "main", last)

	var out, errOut bytes.Buffer
	args := []string{"history", "workload", "checkout", "-n", "shop", "--git", dir, "--branch", "main", "--path", "clusters", "-o", "json"}
	if code := run(context.Background(), args, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got []rolloutRecord
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	var summary []string
	for _, r := range got {
		summary = append(summary, r.Version+" "+r.Outcome)
	}
	if want := []string{"v1 promoted", "v2 in progress"}; !reflect.DeepEqual(summary, want) {
		t.Errorf("rollouts %v, want %v", summary, want)
	}
	stderr := errOut.String()
	for _, tc := range []struct{ what, want string }{
		{"the 1 GiB blob, by its declared size", fmt.Sprintf("commit %s: skipped: clusters/shop/workload/checkout: httproute-checkout.yaml: 1073741824 bytes: larger than scribe history reads (4194304)", inflating)},
		{"the alias bomb, by its decoded size", fmt.Sprintf("commit %s: skipped: clusters/shop/workload/checkout: httproute-checkout.yaml: %s", aliases, yamlstream.ErrTooLarge)},
		{"the file that is not YAML", fmt.Sprintf("commit %s: skipped: clusters/shop/workload/checkout: httproute-checkout.yaml: ", notYAML)},
		{"the missing tree", fmt.Sprintf("commit %s: skipped: clusters/shop/workload/checkout: object not found", noTree)},
		{"the missing parent", fmt.Sprintf("commit %s: skipped, and the history only it leads to: object not found", missing)},
	} {
		if !strings.Contains(stderr, "Warning: "+tc.want) {
			t.Errorf("stderr does not report %s (%q):\n%s", tc.what, tc.want, stderr)
		}
	}
}

// TestHistoryStopsItsWalkAtTheContext: SIGINT or SIGTERM (a cancelled
// context) stops the walk at its next check, not after the whole
// history; and --max-commits bounds the commits read, with a warning.
func TestHistoryStopsItsWalkAtTheContext(t *testing.T) {
	dir, _ := mergedBranchesRepo(t, 200)
	repo, err := openBounded(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	tip, err := historyTip(repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a cancelled context stops the walk after the first commit", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(interrupted{sig: syscall.SIGTERM})
		walk := newHistoryWalk(repo.Storer, defaultHistoryMaxCommits, checkoutID)
		_, err := walk.workloadCommits(ctx, tip, checkoutID, "clusters")
		if !errors.Is(err, interrupted{sig: syscall.SIGTERM}) {
			t.Errorf("error %v, want the interruption", err)
		}
		if walk.loaded != 1 {
			t.Errorf("read %d commits of 402, want 1", walk.loaded)
		}
		var out, errOut bytes.Buffer
		args := []string{"history", "workload", "checkout", "-n", "shop", "--git", dir, "--branch", "main", "--path", "clusters"}
		if code := run(ctx, args, &out, &errOut); code != 128+int(syscall.SIGTERM) {
			t.Errorf("exit %d, want %d: %s", code, 128+int(syscall.SIGTERM), errOut.String())
		}
	})
	t.Run("--max-commits bounds the commits read", func(t *testing.T) {
		walk := newHistoryWalk(repo.Storer, 10, checkoutID)
		all, err := walk.commits(context.Background(), tip)
		if err != nil {
			t.Fatal(err)
		}
		if walk.loaded != 10 || len(all) != 10 {
			t.Errorf("read %d commits, walked %d, want 10", walk.loaded, len(all))
		}
		if want := "the history holds more than 10 commits: only the newest 10 were read (--max-commits)"; len(walk.warnings) != 1 || !strings.Contains(walk.warnings[0], want) {
			t.Errorf("warnings %q, want one saying %q", walk.warnings, want)
		}
	})
}

// TestHistoryEscapesRepositoryText: version names and rollback reasons
// read from the repository reach the table and the JSON without a raw
// control character, escape sequence or bidirectional override; a
// newline in a version name adds no row, and a workflow command in it
// starts no line.
func TestHistoryEscapesRepositoryText(t *testing.T) {
	dir := t.TempDir()
	w, repo := newObjectWriter(t, dir)
	route := func(data []byte) plumbing.Hash {
		return w.tree(map[string]plumbing.Hash{checkoutDir + "httproute-checkout.yaml": w.blob(data)})
	}
	const v1 = "::error::v1\n::set-output name=ok::x\x1b[2J"
	const v2 = "v2\u202eevil\tcol"
	yamlRoute := func(vw ...any) []byte {
		var b strings.Builder
		b.WriteString("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: checkout}\nspec:\n  rules:\n  - backendRefs:\n")
		for _, v := range split(vw...) {
			fmt.Fprintf(&b, "    - {name: %s, weight: %d}\n", strconv.Quote("checkout-"+v.Version), v.Weight)
		}
		return []byte(b.String())
	}
	c := w.commit(scribeMessage("", 1), route(yamlRoute(v1, 100)))
	c = w.commit(scribeMessage("", 2), route(yamlRoute(v1, 90, v2, 10)), c)
	c = w.commit(scribeMessage("rollback of "+v2+": errors\x1b]0;pwned\x07 high\r##[error]x", 2), route(yamlRoute(v1, 100)), c)
	w.branch(repo, "main", c)

	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := []string{"history", "workload", "checkout", "-n", "shop", "--git", dir, "--branch", "main", "--path", "clusters", "-o", format}
			if code := run(context.Background(), args, &out, &errOut); code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			text := out.String()
			for _, r := range text {
				if r != '\n' && termtext.Unsafe(r) {
					t.Errorf("output holds %U:\n%q", r, text)
				}
			}
			if format == "json" {
				var got []rolloutRecord
				if err := json.Unmarshal(out.Bytes(), &got); err != nil {
					t.Fatalf("%v: %s", err, text)
				}
				if len(got) != 2 || got[0].Version != v1 || got[1].Version != v2 || !strings.HasPrefix(got[1].Reason, "errors\x1b]0;pwned") {
					t.Errorf("JSON does not decode to the repository's text: %+v", got)
				}
				return
			}
			lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
			if len(lines) != 3 {
				t.Errorf("%d lines, want a header and 2 rows:\n%s", len(lines), text)
			}
			for _, l := range lines {
				if strings.HasPrefix(strings.TrimSpace(l), "::") || strings.Contains(l, "##[") {
					t.Errorf("a line reads as a workflow command: %q", l)
				}
			}
			for _, want := range []string{`\x3a:error::v1\n::set-output name=ok::x\x1b[2J`, `v2\u202eevil\tcol`, `errors\x1b]0;pwned\a high\r##\x5berror]x`} {
				if !strings.Contains(text, want) {
					t.Errorf("output lacks %s:\n%s", want, text)
				}
			}
		})
	}
}
