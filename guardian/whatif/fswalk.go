package whatif

import "io/fs"

// fsWalk adds up the sizes of the files of fsys.
func fsWalk(fsys fs.FS, total *int64) error {
	return fs.WalkDir(fsys, ".", func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		*total += fi.Size()
		return nil
	})
}
