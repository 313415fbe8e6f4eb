package publish

import (
	"fmt"
	"io"
	"os"
)

// ReadRegular reads the file name, at most limit bytes: below root when root
// is not nil (name is then a slash path inside it), else at name. It never
// blocks: the file is opened non-blocking, so a FIFO without a writer (or
// a device) is opened at once, and anything but a regular file is refused.
func ReadRegular(root *os.Root, name string, limit int64) ([]byte, error) {
	var f *os.File
	var err error
	if root != nil {
		f, err = root.OpenFile(name, os.O_RDONLY|nonBlock, 0)
	} else {
		f, err = os.OpenFile(name, os.O_RDONLY|nonBlock, 0)
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", name, st.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return data, nil
}
