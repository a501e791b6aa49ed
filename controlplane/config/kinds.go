package config

import (
	"slices"
	"strings"

	"github.com/steadydns/steadydns/prober"
)

// CheckType is a health check's type. Each value is its name in the file.
// The probed types are the prober's own; calculated and external checks
// are never probed: the aggregator derives their state.
type CheckType string

const (
	CheckHTTP       = CheckType(prober.HTTP)
	CheckHTTPS      = CheckType(prober.HTTPS)
	CheckTCP        = CheckType(prober.TCP)
	CheckUDP        = CheckType(prober.UDP)
	CheckICMP       = CheckType(prober.ICMP)
	CheckDNS        = CheckType(prober.DNS)
	CheckMetric     = CheckType(prober.Metric)
	CheckCalculated = CheckType("calculated")
	CheckExternal   = CheckType("external")
)

// checkTypes lists every type in the order errors name them.
var checkTypes = slices.Concat(probedTypes, []CheckType{CheckCalculated, CheckExternal})

// probedTypes are the prober's types, in its order.
var probedTypes = func() []CheckType {
	out := make([]CheckType, len(prober.Types))
	for i, t := range prober.Types {
		out[i] = CheckType(t)
	}
	return out
}()

// targetTypes are the probed types that go to a target: all but metric,
// which asks its url.
var targetTypes = slices.DeleteFunc(slices.Clone(probedTypes), func(t CheckType) bool { return t == CheckMetric })

// Probed returns the prober type a check of type t runs as. ok is false
// for calculated and external checks.
func (t CheckType) Probed() (p prober.Type, ok bool) {
	if p := prober.Type(t); slices.Contains(prober.Types, p) {
		return p, true
	}
	return "", false
}

// Policy is how a record chooses among its healthy answers.
type Policy string

const (
	PolicyMultivalue Policy = "multivalue"
	PolicyFailover   Policy = "failover"
	PolicyWeighted   Policy = "weighted"
	PolicyRoundRobin Policy = "round_robin"
)

var policies = []Policy{PolicyMultivalue, PolicyFailover, PolicyWeighted, PolicyRoundRobin}

// WhenAllDown is what a record answers when none of its answers is healthy.
type WhenAllDown string

const (
	WhenAllDownAnswerAll WhenAllDown = "answer_all" // fail open: every answer
	WhenAllDownNoData    WhenAllDown = "nodata"
	WhenAllDownServFail  WhenAllDown = "servfail"
)

var whenAllDowns = []WhenAllDown{WhenAllDownAnswerAll, WhenAllDownNoData, WhenAllDownServFail}

// StalePolicy is what a record answers while the health table is stale.
type StalePolicy string

const (
	StaleKeep      StalePolicy = "keep"       // go on trusting the last table
	StaleAnswerAll StalePolicy = "answer_all" // fail open: every answer
)

var stalePolicies = []StalePolicy{StaleKeep, StaleAnswerAll}

// names joins values for an error message: "a, b, c".
func names[T ~string](vals []T) string {
	s := make([]string, len(vals))
	for i, v := range vals {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}
