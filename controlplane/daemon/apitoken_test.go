package daemon_test

import (
	"net/http"
	"testing"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
)

// api is an HTTP client of e's host that sends the API's write token,
// which every write needs: the one the daemon made in its state_dir, or
// its api_token_file.
func (e *edge) api(t testing.TB) *http.Client {
	t.Helper()
	cfg, err := config.Load(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	token, err := api.ReadToken(api.TokenPath(cfg.Server))
	if err != nil {
		t.Fatal(err)
	}
	c := e.env.Edge.HTTPClient()
	c.Transport = bearer{token, c.Transport}
	return c
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
