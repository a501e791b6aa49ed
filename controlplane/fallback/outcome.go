package fallback

// Outcomes passed to Options.Observe: one per reply, or per message
// dropped without one.
const (
	OutcomeNoError   = "noerror"
	OutcomeNXDomain  = "nxdomain"
	OutcomeNoData    = "nodata"
	OutcomeReferral  = "referral"
	OutcomeRefused   = "refused"
	OutcomeFormErr   = "formerr"
	OutcomeNotImp    = "notimp"
	OutcomeServFail  = "servfail"
	OutcomeBadVers   = "badvers"
	OutcomeYXDomain  = "yxdomain" // a DNAME made too long a name (RFC 6672 §2.2)
	OutcomeTruncated = "truncated"
	OutcomeDropped   = "dropped"
	// Over the rate limit (Options.RRL): sent truncated, or not sent.
	// XDP's counters name the same outcomes.
	OutcomeRRLSlipped = "rrl_slipped"
	OutcomeRRLDropped = "rrl_dropped"
)
