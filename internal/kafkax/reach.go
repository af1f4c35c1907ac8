package kafkax

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"time"
)

// UnreachableError says that no broker accepted a connection: the usual
// reason a start-up fails, which the Kafka client itself reports in
// protocol terms ("Broker Not Available").
type UnreachableError struct {
	Brokers []string
	Err     error // the last dial error
}

func (e *UnreachableError) Error() string {
	return "cannot reach Kafka at " + strings.Join(e.Brokers, ",") + ": " + dialReason(e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// reachable dials each broker until one accepts a TCP connection. It
// returns nil then, else an *UnreachableError.
func reachable(ctx context.Context, brokers []string) error {
	var last error
	for _, b := range brokers {
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			c.Close()
			return nil
		}
		last = err
	}
	if last == nil {
		last = errors.New("no brokers")
	}
	return &UnreachableError{Brokers: brokers, Err: last}
}

// dialReason is the part of a dial error a person acts on: "connection
// refused", "i/o timeout", "no such host".
func dialReason(err error) string {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.Err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}
