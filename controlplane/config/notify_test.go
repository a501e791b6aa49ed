package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// notifyBase has a check and a record for webhook filters to name; rows
// that append to it start at line 12.
const notifyBase = base + `health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80 }
records:
  - name: www.example.test.
    type: A
    answers: [{ value: 198.18.1.1, check: web1 }]
`

func TestNotifyErrors(t *testing.T) {
	hook := notifyBase + "notify:\n  webhooks:\n    - url: http://198.18.0.9/hook\n"
	for _, tt := range []struct{ name, config, want string }{
		{"no url", notifyBase + "notify:\n  webhooks:\n    - { name: a }\n", `config.yaml:14: notify.webhooks[0].url: required`},
		{"not http", notifyBase + "notify:\n  webhooks:\n    - url: ftp://198.18.0.9/\n", `config.yaml:14: notify.webhooks[0].url: scheme "ftp", want http or https`},
		{"no host", notifyBase + "notify:\n  webhooks:\n    - url: \"http:///hook\"\n", `config.yaml:14: notify.webhooks[0].url: no host in "http:///hook"`},
		{"unknown key", hook + "      retry: 3\n", `config.yaml:15: notify.webhooks[0].retry: unknown key`},
		{"bad header name", hook + "      headers: { \"X Bad\": v }\n", `config.yaml:15: notify.webhooks[0].headers.X Bad: "X Bad" is not a header name`},
		{"bad header value", hook + "      headers: { X-Team: \"a\\nb\" }\n", `config.yaml:15: notify.webhooks[0].headers.X-Team: the value has a character a header cannot hold`},
		{"header twice", hook + "      headers: { Authorization: x }\n      header_files: { authorization: token }\n", `config.yaml:16: notify.webhooks[0].header_files.Authorization: header Authorization is also in headers`},
		{"timeout", hook + "      timeout: 0s\n", `config.yaml:15: notify.webhooks[0].timeout: must be positive, got 0s`},
		{"retries", hook + "      retries: 21\n", `config.yaml:15: notify.webhooks[0].retries: 21 out of range 0-20`},
		{"max backoff", hook + "      backoff: 2s\n      max_backoff: 1s\n", `config.yaml:16: notify.webhooks[0].max_backoff: 1s is less than backoff 2s`},
		{"queue", hook + "      queue: 0\n", `config.yaml:15: notify.webhooks[0].queue: 0 out of range 1-100000`},
		{"unknown check", hook + "      events: { checks: [web9] }\n", `config.yaml:15: notify.webhooks[0].events.checks[0]: unknown health check "web9"`},
		{"unknown record", hook + "      events: { records: [api.example.test] }\n", `config.yaml:15: notify.webhooks[0].events.records[0]: no record set named api.example.test. in records`},
		{"same name", hook + "    - url: http://198.18.0.9/other\n", `config.yaml:15: notify.webhooks[1].name: "http://198.18.0.9" is also webhooks[0]'s name: give each webhook a name of its own`},
		{"unknown transition", hook + "      events: { transitions: [sideways] }\n", `config.yaml:15: notify.webhooks[0].events.transitions[0]: unknown value "sideways", want up or down`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.config)
			if err == nil {
				t.Fatalf("loaded %+v, want error %q", c.Notify, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestNotify: every key decoded, defaults where left out, a header file
// resolved against the config's directory, and the section outside the
// hash.
func TestNotify(t *testing.T) {
	c, err := load(t, notifyBase+`notify:
  webhooks:
    - url: https://hooks.example.test/steadydns?token=secret
      headers: { x-team: dns }
      header_files: { Authorization: hook.auth }
      timeout: 2s
      retries: 3
      backoff: 100ms
      max_backoff: 1s
      queue: 10
      events: { checks: [web1], records: [WWW.example.test], transitions: [down] }
    - url: http://198.18.0.9:8080/
      name: oncall
`)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := os.Getwd()
	want := []Webhook{
		{URL: "https://hooks.example.test/steadydns?token=secret", Headers: map[string]string{"X-Team": "dns"},
			HeaderFiles: map[string]string{"Authorization": filepath.Join(dir, "hook.auth")},
			Timeout:     2 * time.Second, Retries: 3, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second, Queue: 10,
			Events: EventFilter{Checks: []string{"web1"}, Records: []string{"www.example.test."}, Transitions: []string{"down"}}},
		{URL: "http://198.18.0.9:8080/", Name: "oncall", Timeout: 5 * time.Second, Retries: 5, Backoff: time.Second, MaxBackoff: 30 * time.Second, Queue: 1000},
	}
	if !reflect.DeepEqual(c.Notify.Webhooks, want) {
		t.Errorf("webhooks\n%+v\nwant\n%+v", c.Notify.Webhooks, want)
	}
	if a, b := c.Notify.Webhooks[0].WebhookName(), c.Notify.Webhooks[1].WebhookName(); a != "https://hooks.example.test" || b != "oncall" {
		t.Errorf("names %q, %q: want the scheme and host without the query, and the name given", a, b)
	}
	plain, err := load(t, notifyBase)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Hash != c.Hash {
		t.Error("the notify section changed the config hash")
	}
}
