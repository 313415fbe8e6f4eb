package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/scribe-gitops/scribe/render"
)

// maxInputSize caps one -f file: far above any set of custom resources, far
// below what would hurt the machine reading it.
const maxInputSize = 16 << 20

// readInput reads one -f file. Only regular files (or symbolic links to
// them) are read: a FIFO, device or socket is refused without blocking
// (stat first; then the file is opened non-blocking and checked again on
// the open descriptor, so a swap in between is caught too). A file above
// maxInputSize is refused.
func readInput(ctx context.Context, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	st, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	if err := regularInput(name, st); err != nil {
		return nil, err
	}
	f, err := openNonBlocking(name)
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	defer func() { _ = f.Close() }()
	st, err = f.Stat()
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	if err := regularInput(name, st); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxInputSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxInputSize {
		return nil, fmt.Errorf("--file %s: larger than %d MiB, the limit of one input file", name, maxInputSize>>20)
	}
	return data, nil
}

// regularInput refuses anything but a regular file of at most maxInputSize.
func regularInput(name string, st fs.FileInfo) error {
	m := st.Mode()
	if !m.IsRegular() {
		return fmt.Errorf("--file %s: not a regular file (%s): only regular files are read", name, fileKind(m))
	}
	if st.Size() > maxInputSize {
		return fmt.Errorf("--file %s: larger than %d MiB, the limit of one input file", name, maxInputSize>>20)
	}
	return nil
}

// fileKind names the type of a file that is not regular.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "mode " + m.Type().String()
	}
}

// stdinArg is the -f argument that reads standard input.
const stdinArg = "-"

// stdinName names standard input in messages.
const stdinName = "<stdin>"

// inputDoc is one document of the -f inputs: the file it was read from
// (stdinName for standard input) and its JSON shape, or why the file
// could not be split into objects.
type inputDoc struct {
	file string
	obj  map[string]any
	err  error
}

// readInputs is the one reader of every command's -f arguments: each file
// and each manifest below each directory (see expandFiles), and "-" as
// standard input, a YAML stream read once (bounded like a file). It
// returns the documents in input order and the names of the files read.
func readInputs(ctx context.Context, args []string, stdin io.Reader) ([]inputDoc, []string, error) {
	files, err := expandFiles(args)
	if err != nil {
		return nil, nil, err
	}
	var docs []inputDoc
	names := make([]string, 0, len(files))
	for _, file := range files {
		var data []byte
		name := file
		if file == stdinArg {
			name = stdinName
			data, err = readStdin(ctx, stdin)
		} else {
			data, err = readInput(ctx, file)
		}
		if err != nil {
			return nil, nil, err
		}
		names = append(names, name)
		objs, err := render.ObjectsFromYAML(data)
		if err != nil {
			docs = append(docs, inputDoc{file: name, err: err})
			continue
		}
		for _, obj := range objs {
			docs = append(docs, inputDoc{file: name, obj: obj})
		}
	}
	return docs, names, nil
}

// readStdin reads standard input whole, at most maxInputSize.
func readStdin(ctx context.Context, stdin io.Reader) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if stdin == nil {
		return nil, fmt.Errorf("--file -: no standard input")
	}
	data, err := io.ReadAll(io.LimitReader(stdin, maxInputSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stdinName, err)
	}
	if len(data) > maxInputSize {
		return nil, fmt.Errorf("--file -: standard input is larger than %d MiB, the limit of one input file", maxInputSize>>20)
	}
	return data, nil
}

// hidden says whether a file or directory name is hidden (starts with a
// dot), as .git, .github or .golangci.yml are.
func hidden(name string) bool { return strings.HasPrefix(name, ".") && name != "." && name != ".." }

// expandFiles turns files and directories into a sorted list of manifest
// files: a directory is walked for *.yaml, *.yml and *.json entries that
// are not directories. Below a directory, hidden files and
// folders (.git, .github, .golangci.yml) are skipped; an argument is read
// whatever its name. "-" (standard input) may be given once. Whether each
// file is a regular file is readInput's check.
func expandFiles(args []string) ([]string, error) {
	var out []string
	stdin := false
	for _, a := range args {
		if a == stdinArg {
			if stdin {
				return nil, fmt.Errorf("--file -: standard input can be read only once")
			}
			stdin = true
			out = append(out, a)
			continue
		}
		st, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		var found []string
		err = filepath.WalkDir(a, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p != a && hidden(d.Name()) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					found = append(found, p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("--file %s: %w", a, err)
		}
		out = append(out, found...)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("--file: no *.yaml, *.yml or *.json files in %s", strings.Join(args, ", "))
	}
	return out, nil
}
