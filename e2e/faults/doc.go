// Package faults holds the network fault tests and the soak of the
// service: the role binaries on hosts of their own (network namespaces,
// package netlab), links between live processes cut, delayed and made
// lossy, and a nemesis that picks a fault every minute. They need root and
// take minutes, so they build only with the tag faults:
//
//	make faults   # every fault test, bounded
//	make soak     # the 30-minute soak (SOAK_DURATION)
//
// Every test ends with exact accounting at the viewers: every message
// logic accepted was shown by every viewer exactly once (resume counted).
package faults
