// Package prober runs health checks and reports their raw results.
//
// A Checker probes one target once (http, https, tcp, udp, icmp or dns) or
// asks a Prometheus-compatible API for a metric (metric), and says what it
// saw: healthy or not, a reason code, a detail and the latency.
// A Scheduler runs a set of checks, each once per interval with a start
// spread by a hash of its id, under a worker limit. A Framer keeps the latest
// result of every check and emits a fixed-size frame every period, the unit
// that travels from probers to aggregators.
//
// Results are raw: invert, thresholds, admin overrides, calculated and
// external checks are the aggregator's (controlplane/health), so every
// prober reports the same thing for the same observation.
package prober
