// Package cmd holds the end-to-end tests of the service's binaries: they
// are built and run as an operator would, from the shipped configs with
// only addresses overridden, against a real redis-server and the dev
// Kafka broker (cmd/devkafka). The binaries themselves are the
// subdirectories.
package cmd
