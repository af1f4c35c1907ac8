// Package e2e holds the end-to-end tests of the service's binaries: they
// are built from cmd/ and run as an operator would, from the shipped
// configs with only addresses overridden, against a real redis-server and
// the dev Kafka broker (cmd/devkafka).
package e2e
