//go:build unix

package redisserver

import "syscall"

var (
	stopSignal = syscall.SIGSTOP
	contSignal = syscall.SIGCONT
)
