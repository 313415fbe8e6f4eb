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

// expandFiles turns files and directories into a sorted list of manifest
// files. A directory is walked for *.yaml, *.yml and *.json entries that
// are not directories; whether each is a regular file is readInput's check.
func expandFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		err = filepath.WalkDir(a, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					out = append(out, p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("--file %s: %w", a, err)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("--file: no *.yaml, *.yml or *.json files in %s", strings.Join(args, ", "))
	}
	return out, nil
}
