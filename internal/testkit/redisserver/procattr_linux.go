package redisserver

import "syscall"

// ChildAttr makes a server die with the test process that started it
// (SIGKILL when its parent thread ends): a test binary that panics or is
// killed at its -timeout never reaches StopAll, and a server left running
// would keep the test's ports, memory and inherited descriptors (a lock
// file the test runs under among them) until someone kills it by hand.
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
