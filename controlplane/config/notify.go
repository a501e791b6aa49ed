package config

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	yaml "go.yaml.in/yaml/v3"
	"golang.org/x/net/http/httpguts"
)

// Notify is the notify section: where each change of a check's state is
// posted. It is outside Config.Hash: a webhook changed on one aggregator
// must not make the fleet reject its frames and tables.
type Notify struct {
	Webhooks []Webhook
}

// Webhook is one receiver of state changes, as JSON POSTs.
type Webhook struct {
	URL  string // http or https
	Name string // in metrics and logs; default the URL's scheme and host
	// Headers go with every POST; HeaderFiles are headers whose value is
	// a file's content, trimmed, read when the config is applied, so a
	// secret stays out of the config. Paths are absolute.
	Headers     map[string]string
	HeaderFiles map[string]string
	Timeout     time.Duration // per attempt; default 5s
	Retries     int           // attempts after a failed first; default 5
	Backoff     time.Duration // before the first retry, doubling; default 1s
	MaxBackoff  time.Duration // the most between two attempts; default 30s
	Queue       int           // events waiting; when full the oldest is dropped; default 1000
	Events      EventFilter
}

// EventFilter is a webhook's events: the changes it is sent. An empty
// field selects every change.
type EventFilter struct {
	Checks      []string // check ids
	Records     []string // record names, fully qualified, lowercase
	Transitions []string // "up" (to healthy), "down" (to unhealthy)
}

// The limits of a webhook's keys.
const (
	MaxWebhookRetries = 20
	MaxWebhookQueue   = 100000
)

var (
	notifyKeys  = []string{"webhooks"}
	webhookKeys = []string{"url", "name", "headers", "header_files", "timeout", "retries", "backoff", "max_backoff", "queue", "events"}
	eventsKeys  = []string{"checks", "records", "transitions"}
)

func (d *decoder) notify(f fields) Notify {
	var n Notify
	f.list("webhooks", func(path string, node *yaml.Node) {
		n.Webhooks = append(n.Webhooks, d.webhook(d.mapping(node, path, webhookKeys)))
	})
	return n
}

func (d *decoder) webhook(f fields) Webhook {
	w := Webhook{Timeout: 5 * time.Second, Retries: 5, Backoff: time.Second, MaxBackoff: 30 * time.Second, Queue: 1000}
	f.str("url", &w.URL)
	f.str("name", &w.Name)
	w.Headers = d.headers(f, "headers", false)
	w.HeaderFiles = d.headers(f, "header_files", true)
	f.duration("timeout", &w.Timeout)
	f.int("retries", &w.Retries)
	f.duration("backoff", &w.Backoff)
	f.duration("max_backoff", &w.MaxBackoff)
	f.int("queue", &w.Queue)
	ef := f.mapping("events", eventsKeys)
	ef.strs("checks", &w.Events.Checks)
	ef.strs("records", &w.Events.Records)
	for i, r := range w.Events.Records {
		w.Events.Records[i] = dns.Fqdn(strings.ToLower(r))
	}
	ef.strs("transitions", &w.Events.Transitions)
	return w
}

// headers decodes a mapping of header names to values or, with files, to
// paths, which resolve against the directory of the file that holds the
// section.
func (d *decoder) headers(f fields, k string, files bool) map[string]string {
	var out map[string]string
	d.each(f.get(k), f.key(k), false, func(e entry) {
		if !httpguts.ValidHeaderFieldName(e.key) {
			d.errorf(e.keyNode, e.path, "%q is not a header name", e.key)
			return
		}
		if e.val == nil {
			d.errorf(e.keyNode, e.path, "no value")
			return
		}
		v, ok := d.scalar(e.val, e.path, "a string")
		if !ok {
			return
		}
		if files && !filepath.IsAbs(v) {
			abs, err := filepath.Abs(filepath.Join(filepath.Dir(d.fileOf("notify")), v))
			if err != nil {
				d.errorf(e.val, e.path, "resolving the file's path: %v", err)
			}
			v = abs
		}
		if !files && !httpguts.ValidHeaderFieldValue(v) {
			d.errorf(e.val, e.path, "the value has a character a header cannot hold")
			return
		}
		if out == nil {
			out = map[string]string{}
		}
		out[http.CanonicalHeaderKey(e.key)] = v
	})
	return out
}

func (v *validator) notify() {
	records := map[string]bool{}
	for _, r := range v.c.Records {
		records[r.Name] = true
	}
	names := map[string]int{}
	for i, w := range v.c.Notify.Webhooks {
		key := func(k string) string { return fmt.Sprintf("notify.webhooks[%d].%s", i, k) }
		// The name labels the webhook's metrics and its queue across reloads.
		if j, dup := names[w.WebhookName()]; dup {
			v.errorf(key("name"), "%q is also webhooks[%d]'s name: give each webhook a name of its own", w.WebhookName(), j)
		}
		names[w.WebhookName()] = i
		u, err := url.Parse(w.URL)
		switch {
		case w.URL == "":
			v.errorf(key("url"), "required")
		case err != nil:
			v.errorf(key("url"), "%v", err)
		case u.Scheme != "http" && u.Scheme != "https":
			v.errorf(key("url"), "scheme %q, want http or https", u.Scheme)
		case u.Host == "":
			v.errorf(key("url"), "no host in %q", w.URL)
		}
		for h := range w.HeaderFiles {
			if _, dup := w.Headers[h]; dup {
				v.errorf(key("header_files."+h), "header %s is also in headers", h)
			}
		}
		if w.Timeout <= 0 {
			v.errorf(key("timeout"), "must be positive, got %v", w.Timeout)
		}
		if w.Retries < 0 || w.Retries > MaxWebhookRetries {
			v.errorf(key("retries"), "%d out of range 0-%d", w.Retries, MaxWebhookRetries)
		}
		if w.Backoff <= 0 {
			v.errorf(key("backoff"), "must be positive, got %v", w.Backoff)
		}
		if w.MaxBackoff < w.Backoff {
			v.errorf(key("max_backoff"), "%v is less than backoff %v", w.MaxBackoff, w.Backoff)
		}
		if w.Queue < 1 || w.Queue > MaxWebhookQueue {
			v.errorf(key("queue"), "%d out of range 1-%d", w.Queue, MaxWebhookQueue)
		}
		for j, id := range w.Events.Checks {
			if v.byID[id] == nil {
				v.errorf(fmt.Sprintf("%s[%d]", key("events.checks"), j), "unknown health check %q", id)
			}
		}
		for j, name := range w.Events.Records {
			if !records[name] {
				v.errorf(fmt.Sprintf("%s[%d]", key("events.records"), j), "no record set named %s in records", name)
			}
		}
		for j, t := range w.Events.Transitions {
			if !slices.Contains([]string{"up", "down"}, t) {
				v.errorf(fmt.Sprintf("%s[%d]", key("events.transitions"), j), "unknown value %q, want up or down", t)
			}
		}
	}
}

// WebhookName is w's name: its own, else the URL's scheme and host, which
// keeps a secret in its path or query out of metrics and logs.
func (w *Webhook) WebhookName() string {
	if w.Name != "" {
		return w.Name
	}
	u, err := url.Parse(w.URL)
	if err != nil {
		return w.URL
	}
	return u.Scheme + "://" + u.Host
}
