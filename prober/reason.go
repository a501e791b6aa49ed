package prober

// Reason says why a check came out as it did. It travels in result frames
// as one byte, so values are fixed once released; add new ones at the end.
type Reason uint8

const (
	ReasonNone           Reason = iota // no result: a padding entry in a frame
	ReasonOK                           // the check passed
	ReasonTimeout                      // no complete answer before the timeout
	ReasonRefused                      // connection refused, or ICMP port unreachable for udp
	ReasonUnreachable                  // host or network unreachable
	ReasonReset                        // the connection was reset mid-check
	ReasonStatus                       // http: status code not expected
	ReasonBodyMismatch                 // http: body lacks the expected text
	ReasonTLSError                     // https: handshake or certificate verification failed
	ReasonReplyMismatch                // tcp, udp: reply lacks the expected text
	ReasonRcode                        // dns: rcode not expected
	ReasonAnswerMismatch               // dns: no answer with the expected data
	ReasonResolve                      // the target hostname did not resolve
	ReasonError                        // anything else; Detail has the error
	ReasonMetricZero                   // metric: a sample of the result is zero
	ReasonMetricEmpty                  // metric: the result holds no sample, or one that is NaN
	ReasonMetricError                  // metric: the query failed; Detail says how
	reasonCount
)

var reasonNames = [reasonCount]string{
	"none", "ok", "timeout", "refused", "unreachable", "reset", "status",
	"body_mismatch", "tls_error", "reply_mismatch", "rcode", "answer_mismatch",
	"resolve", "error", "metric_zero", "metric_empty", "metric_error",
}

// String is the reason's label as the API and metrics show it: "timeout",
// "body_mismatch"…
func (r Reason) String() string {
	if r < reasonCount {
		return reasonNames[r]
	}
	return "unknown"
}
