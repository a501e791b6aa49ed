package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
)

// Webhooks are the targets of cfg's notify.webhooks. Header files are
// read now: an error names the key of the one that cannot be.
func Webhooks(cfg *config.Config) ([]Target, error) {
	var out []Target
	for i, w := range cfg.Notify.Webhooks {
		header := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"steadydns"}}
		for k, v := range w.Headers {
			header.Set(k, v)
		}
		for k, path := range w.HeaderFiles {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, cfg.Errorf(fmt.Sprintf("notify.webhooks[%d].header_files.%s", i, k), "%v", err)
			}
			header.Set(k, strings.TrimSpace(string(b)))
		}
		out = append(out, Target{Name: w.WebhookName(), Filter: filterOf(w.Events), Send: post(w.URL, header),
			Timeout: w.Timeout, Retries: w.Retries, Backoff: w.Backoff, MaxBackoff: w.MaxBackoff, Queue: w.Queue})
	}
	return out, nil
}

func filterOf(e config.EventFilter) health.Filter {
	f := health.Filter{Checks: e.Checks, Records: e.Records}
	// Both directions are every change, as none is.
	if len(e.Transitions) == 1 {
		f.To = map[string]string{"up": health.StateHealthy, "down": health.StateUnhealthy}[e.Transitions[0]]
	}
	return f
}

// maxReply bounds what of a receiver's reply is read: enough to reuse
// the connection after a short reply, and to quote in an error.
const maxReply = 4 << 10

// post POSTs each body to u with header. A 2xx reply delivers it; 408,
// 429 and 5xx are worth another attempt, another 4xx is not.
func post(u string, header http.Header) func(context.Context, []byte) error {
	client := &http.Client{}
	return func(ctx context.Context, body []byte) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
		if err != nil {
			return &Permanent{fmt.Errorf("posting: %w", err)}
		}
		req.Header = header.Clone()
		resp, err := client.Do(req)
		if err != nil {
			// url.Error quotes the URL, whose path or query may hold a
			// secret.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return fmt.Errorf("posting: %w", err)
		}
		reply, _ := io.ReadAll(io.LimitReader(resp.Body, maxReply))
		resp.Body.Close()
		code := resp.StatusCode
		switch {
		case code >= 200 && code < 300:
			return nil
		case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
			return fmt.Errorf("posting: %s: %s", resp.Status, firstLine(reply))
		}
		return &Permanent{fmt.Errorf("posting: %s: %s", resp.Status, firstLine(reply))}
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}
