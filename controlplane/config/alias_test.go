package config

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/miekg/dns"
)

func TestTargetChecks(t *testing.T) {
	c, err := load(t, base+`health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80 }
  web2: { type: tcp, target: 198.18.1.2, port: 80 }
records:
  - name: lb.example.test.
    type: A
    answers:
      - { value: 198.18.1.1, check: web1 }
      - { value: 198.18.1.2, check: web2 }
      - { value: 198.18.1.3, check: web1, backup: true }
  - name: open.example.test.
    type: A
    answers:
      - { value: 198.18.1.4, check: web1 }
      - value: 198.18.1.5
  - name: example.test.
    type: A
    policy: failover
    answers:
      - { alias: LB.example.test, evaluate_target_health: true }
      - { value: 198.18.1.9, priority: 1 }
  - name: api.example.test.
    type: A
    answers:
      - { alias: lb.example.test., evaluate_target_health: true }
      - { alias: open.example.test., evaluate_target_health: true }
      - { alias: ns.example.test., evaluate_target_health: true }
  - name: www.example.test.
    type: CNAME
    policy: failover
    answers:
      - { value: Api.Example.Test, check: web1 }
      - { value: lb.example.test, priority: 1 }
`)
	if err != nil {
		t.Fatal(err)
	}
	// One check per target whose candidates all have checks: open has one
	// without (always a healthy answer), ns is zone data.
	var ids []string
	for i := range c.Checks.Len() {
		ids = append(ids, c.Checks.ID(i))
	}
	same(t, "ids", ids, []string{"web1", "web2", "alias:lb.example.test.:A"})
	got, _ := c.Checks.Get("alias:lb.example.test.:A")
	want := Check{ID: "alias:lb.example.test.:A", Type: CheckCalculated, Children: []string{"web1", "web2"}, MinHealthy: 1, Admin: "auto", Cell: "default"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("target check:\ngot  %+v\nwant %+v", got, want)
	}
	same(t, "apex alias", c.Records[2].Answers[0], Answer{Alias: "lb.example.test.", EvaluateTargetHealth: true, Weight: 1})
	same(t, "cname", c.Records[4].Type, dns.TypeCNAME)
	same(t, "cname answers", c.Records[4].Answers, []Answer{
		{Target: "api.example.test.", Check: "web1", Weight: 1},
		{Target: "lb.example.test.", Priority: 1, Weight: 1},
	})
	same(t, "value", c.Records[2].Answers[1].Value, netip.MustParseAddr("198.18.1.9"))
}

func TestTargetChecksOneCell(t *testing.T) {
	_, err := load(t, base+`health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80, cell: red }
  web2: { type: tcp, target: 198.18.1.2, port: 80, cell: blue }
records:
  - name: lb.example.test.
    type: A
    answers:
      - { value: 198.18.1.1, check: web1 }
      - { value: 198.18.1.2, check: web2 }
  - name: example.test.
    type: A
    answers:
      - { alias: lb.example.test, evaluate_target_health: true }
cluster:
  cells: [{name: red, probers: 1, aggregators: 1}, {name: blue, probers: 1, aggregators: 1}]
`)
	want := `config.yaml:18: records[1].answers[0].evaluate_target_health: the checks of lb.example.test. A are in cells "red" and "blue": the target's health is computed in one cell, so its checks must share it`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}
