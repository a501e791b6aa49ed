package prober

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
)

// classify maps a socket error to a reason and a short detail. The detail
// names the condition, not the call chain, so the API shows "connection
// refused" rather than "dial tcp 198.18.1.1:80: connect: connection refused".
func classify(err error) (Reason, string) {
	var dnsErr *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout, "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonRefused, "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.EHOSTDOWN):
		return ReasonUnreachable, "host unreachable"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ENETDOWN):
		return ReasonUnreachable, "network unreachable"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return ReasonReset, "connection reset"
	case errors.As(err, &dnsErr):
		return ReasonResolve, err.Error()
	}
	return ReasonError, err.Error()
}
