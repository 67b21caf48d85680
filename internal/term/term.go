// Package term says whether output goes to a terminal, where a progress
// line or a secret shown once may go; logs, files and pipes never get one.
package term

import (
	"io"
	"os"
)

// Is reports whether w is a terminal. It takes any character device for
// a terminal (/dev/null too, where what is shown is simply lost), which
// needs no terminal library.
func Is(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && st.Mode()&os.ModeDevice != 0
}
