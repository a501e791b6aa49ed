package daemon

import (
	"context"
	"net"
	"net/http"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
)

// apiServer is the HTTP API: checks, records, metrics, readiness and
// reloads (api.Serve, with the tokens and TLS of the server section).
type apiServer struct {
	cfg     *config.Config
	handler http.Handler
	srv     *http.Server
	addr    net.Addr
}

func newAPI(cfg *config.Config, st api.State, m *api.Metrics) *apiServer {
	return &apiServer{cfg: cfg, handler: api.Handler(st, m)}
}

func (a *apiServer) apply(*Plan) error { return nil }

func (a *apiServer) start() error {
	var err error
	a.srv, a.addr, err = api.Serve(a.handler, a.cfg)
	return err
}

func (a *apiServer) stop(ctx context.Context, _ bool) error {
	if a.srv == nil {
		return nil
	}
	return a.srv.Shutdown(ctx)
}

func (a *apiServer) close(context.Context) error { return nil }
