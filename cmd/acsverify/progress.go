package main

import "io"

// progressReader returns r unchanged for now.
func progressReader(r io.Reader, name string, stderr io.Writer) io.Reader { return r }
