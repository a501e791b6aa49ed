package testenv

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestPrometheus: a server in one backend host scrapes another's /metrics,
// answers queries with what it scraped, refuses connections once stopped
// and answers again once started.
func TestPrometheus(t *testing.T) {
	e := Start(t, Options{Backends: 2})
	var ln net.Listener
	if err := e.Backends[0].Do(func() (err error) {
		ln, err = net.Listen("tcp", "198.18.1.1:80")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "# TYPE testenv_gauge gauge\ntestenv_gauge 7")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	p := StartPrometheus(t, e.Backends[1], "198.18.1.2:9090", time.Second, "198.18.1.1:80")
	c := e.Backends[1].HTTPClient()
	value := func() (string, error) {
		resp, err := c.PostForm(p.URL+"/api/v1/query", url.Values{"query": {`testenv_gauge{job="backend",instance="198.18.1.1:80"}`}})
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var r struct {
			Data struct {
				Result []struct{ Value [2]any } `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return "", err
		}
		if len(r.Data.Result) != 1 {
			return "", fmt.Errorf("%d samples", len(r.Data.Result))
		}
		return fmt.Sprint(r.Data.Result[0].Value[1]), nil
	}
	waitValue := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			v, err := value()
			if err == nil && v == "7" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: query gave %q, %v; want 7", what, v, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitValue("started")

	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := value(); err == nil {
		t.Fatal("a stopped server answered a query")
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitValue("restarted")
}
