package config

import (
	"testing"
	"time"
)

// TestMetricCheck: a metric check keeps its url, query and
// insufficient_data, takes the probed types' defaults, and asks its url
// rather than an answer's address.
func TestMetricCheck(t *testing.T) {
	c, err := load(t, base+`health_checks:
  orders: {type: metric, url: "http://198.18.1.2:9090/", query: 'sum(rate(orders_total[5m])) > 0', insufficient_data: unhealthy, invert: true, regions: [r1, r2, r3]}
  plain: {type: metric, url: "https://prom.example.test/prometheus", query: up}
records:
  - name: www.example.test.
    type: A
    answers: [{value: 198.18.1.1, check: orders}, {value: 198.18.1.2, check: plain}]
`)
	if err != nil {
		t.Fatal(err)
	}
	orders, _ := c.Checks.Get("orders")
	same(t, "orders", orders, Check{ID: "orders", Type: CheckMetric, URL: "http://198.18.1.2:9090/", Query: "sum(rate(orders_total[5m])) > 0",
		InsufficientData: "unhealthy", Invert: true, Regions: []string{"r1", "r2", "r3"},
		Interval: 10 * time.Second, Timeout: 2 * time.Second, UnhealthyThreshold: 3, HealthyThreshold: 3, Admin: "auto", Cell: DefaultCell})
	plain, _ := c.Checks.Get("plain")
	same(t, "plain's insufficient_data", plain.InsufficientData, "last_known")
}

// TestMetricOnAlias: a metric check asks its url, so an answer without an
// address, an alias or a CNAME target, may use it.
func TestMetricOnAlias(t *testing.T) {
	_, err := load(t, base+`health_checks:
  lb: {type: metric, url: "http://198.18.1.2:9090", query: up}
records:
  - name: example.test.
    type: A
    answers: [{alias: lb.example.test, check: lb}, {value: 198.18.1.1}]
  - name: www.example.test.
    type: CNAME
    answers: [{value: lb.example.test, check: lb}]
  - name: lb.example.test.
    type: A
    answers: [{value: 198.18.1.2}]
`)
	if err != nil {
		t.Fatal(err)
	}
}

// TestMetricErrors: a metric check without what it needs, or with a key
// of another type, is refused at its file, line and key.
func TestMetricErrors(t *testing.T) {
	const record = "records:\n  - name: www.example.test.\n    type: A\n    answers: [{value: 198.18.1.1, check: m}]\n"
	for _, tc := range []struct{ name, check, want string }{
		{"no url", "{type: metric, query: up}", `config.yaml:7: health_checks.m.url: required for metric checks: the base URL of a Prometheus-compatible API, such as http://198.18.1.2:9090`},
		{"no query", "{type: metric, url: \"http://198.18.1.2:9090\"}", `config.yaml:7: health_checks.m.query: required for metric checks: a PromQL expression`},
		{"blank query", "{type: metric, url: \"http://198.18.1.2:9090\", query: \" \"}", `config.yaml:7: health_checks.m.query: required for metric checks: a PromQL expression`},
		{"url without scheme", "{type: metric, url: \"prom.example.test:9090\", query: up}", `config.yaml:7: health_checks.m.url: url "prom.example.test:9090" must start with http:// or https://`},
		{"url of the endpoint", "{type: metric, url: \"http://198.18.1.2:9090/api/v1/query\", query: up}", `config.yaml:7: health_checks.m.url: url "http://198.18.1.2:9090/api/v1/query" must be the server's base URL: /api/v1/query is appended`},
		{"url with a query", "{type: metric, url: \"http://198.18.1.2:9090/?query=up\", query: up}", `config.yaml:7: health_checks.m.url: url "http://198.18.1.2:9090/?query=up" must not hold a query or fragment`},
		{"insufficient_data unknown", "{type: metric, url: \"http://198.18.1.2:9090\", query: up, insufficient_data: ignore}", `config.yaml:7: health_checks.m.insufficient_data: unknown value "ignore", want one of healthy, unhealthy, last_known`},
		{"target", "{type: metric, url: \"http://198.18.1.2:9090\", query: up, target: 198.18.1.2}", `config.yaml:7: health_checks.m.target: does not apply to metric checks`},
		{"port", "{type: metric, url: \"http://198.18.1.2:9090\", query: up, port: 9090}", `config.yaml:7: health_checks.m.port: does not apply to metric checks`},
		{"unknown key", "{type: metric, url: \"http://198.18.1.2:9090\", query: up, headers: {a: b}}", `config.yaml:7: health_checks.m.headers: unknown key`},
		{"query on http", "{type: http, query: up}", `config.yaml:7: health_checks.m.query: does not apply to http checks`},
		{"url on tcp", "{type: tcp, port: 80, url: \"http://198.18.1.2:9090\"}", `config.yaml:7: health_checks.m.url: does not apply to tcp checks`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, base+"health_checks:\n  m: "+tc.check+"\n"+record)
			if err == nil || err.Error() != tc.want {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}
