//go:build !linux

package etcdstore

import "os/exec"

func dieWithParent(cmd *exec.Cmd) {}
