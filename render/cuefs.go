package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// memFS is a read-only in-memory file system: the CUE module the engine
// loads (load.Config.FS), so that no file or directory of the host can
// shadow, extend or break it, wherever the binary sits.
//
// Paths are fs.FS paths (slash-separated, no leading slash, "." the root).
// Directories are implied by the files under them. Build one with add and
// seal it before use; it is then safe for concurrent use.
type memFS struct {
	files map[string][]byte
	dirs  map[string][]fs.DirEntry // sorted by name; "." is the root
}

func newMemFS() *memFS {
	return &memFS{files: map[string][]byte{}, dirs: map[string][]fs.DirEntry{".": nil}}
}

// add stores data at name, a clean fs.FS path, and creates its parent
// directories. A name that is, or sits under, an existing file or
// directory of the other kind is refused.
func (m *memFS) add(name string, data []byte) error {
	if !fs.ValidPath(name) || name == "." {
		return fmt.Errorf("add %q to the CUE module: not a valid file path", name)
	}
	if _, ok := m.dirs[name]; ok {
		return fmt.Errorf("add %q to the CUE module: a directory of that name exists", name)
	}
	for dir := path.Dir(name); ; dir = path.Dir(dir) {
		if _, ok := m.files[dir]; ok {
			return fmt.Errorf("add %q to the CUE module: %s is a file", name, dir)
		}
		if dir == "." {
			break
		}
	}
	m.files[name] = data
	child, isDir := name, false
	for dir := path.Dir(name); ; dir = path.Dir(dir) {
		entries, exists := m.dirs[dir]
		e := memEntry{name: path.Base(child), dir: isDir}
		if !isDir {
			e.size = int64(len(data))
		}
		i, found := slices.BinarySearchFunc(entries, e.name, func(d fs.DirEntry, n string) int { return strings.Compare(d.Name(), n) })
		if !found {
			m.dirs[dir] = slices.Insert(entries, i, fs.DirEntry(e))
		}
		if exists || dir == "." {
			break
		}
		child, isDir = dir, true
	}
	return nil
}

// Open implements fs.FS.
func (m *memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if data, ok := m.files[name]; ok {
		return &memFile{info: memEntry{name: path.Base(name), size: int64(len(data))}, r: bytes.NewReader(data)}, nil
	}
	if entries, ok := m.dirs[name]; ok {
		return &memDir{info: memEntry{name: path.Base(name), dir: true}, entries: entries}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadFile implements fs.ReadFileFS.
func (m *memFS) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrInvalid}
	}
	data, ok := m.files[name]
	if !ok {
		if _, dir := m.dirs[name]; dir {
			return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
		}
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(data), nil
}

// ReadDir implements fs.ReadDirFS.
func (m *memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	entries, ok := m.dirs[name]
	if !ok {
		if _, file := m.files[name]; file {
			return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
		}
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(entries), nil
}

// Stat implements fs.StatFS.
func (m *memFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	if data, ok := m.files[name]; ok {
		return memEntry{name: path.Base(name), size: int64(len(data))}, nil
	}
	if _, ok := m.dirs[name]; ok {
		return memEntry{name: path.Base(name), dir: true}, nil
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

// memEntry is both the fs.FileInfo and the fs.DirEntry of a memFS file or
// directory.
type memEntry struct {
	name string
	size int64
	dir  bool
}

func (e memEntry) Name() string               { return e.name }
func (e memEntry) Size() int64                { return e.size }
func (e memEntry) ModTime() time.Time         { return time.Time{} }
func (e memEntry) IsDir() bool                { return e.dir }
func (e memEntry) Sys() any                   { return nil }
func (e memEntry) Type() fs.FileMode          { return e.Mode().Type() }
func (e memEntry) Info() (fs.FileInfo, error) { return e, nil }
func (e memEntry) Mode() fs.FileMode {
	if e.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}

type memFile struct {
	info memEntry
	r    *bytes.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Read(b []byte) (int, error) { return f.r.Read(b) }
func (f *memFile) Close() error               { return nil }

// Seek and ReadAt let callers that look for them (http.FileServer,
// io.SectionReader) use a memFile as they would an *os.File.
func (f *memFile) Seek(offset int64, whence int) (int64, error) { return f.r.Seek(offset, whence) }
func (f *memFile) ReadAt(b []byte, off int64) (int, error)      { return f.r.ReadAt(b, off) }

type memDir struct {
	info    memEntry
	entries []fs.DirEntry
	off     int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *memDir) Close() error               { return nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: errors.New("is a directory")}
}

// ReadDir implements fs.ReadDirFile.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return slices.Clone(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return slices.Clone(rest[:n]), nil
}
