// Package shmdir tidies the shared-memory directory that the shm
// transport and the one-sided windows both create segments in. A segment's
// name starts with its maker's prefix and the creating process's pid
// ("<prefix><pid>-…"), and is unlinked as soon as every process that needs
// it has mapped it; a file whose creator is gone can only be a leftover of
// a process that died before that point.
package shmdir
