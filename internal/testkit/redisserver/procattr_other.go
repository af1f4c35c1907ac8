//go:build !linux

package redisserver

import "syscall"

// ChildAttr: only Linux can tie a child's life to its parent's.
func ChildAttr() *syscall.SysProcAttr { return nil }
