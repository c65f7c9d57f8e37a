package datastore

import (
	"os"
	"syscall"
)

// inode returns the file's inode number; a rename over a file changes it even
// when size and mtime happen to match.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
