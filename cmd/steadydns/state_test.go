package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/testenv"
)

// TestCorruptStateAfterCrash: `steadydns serve` with web1 set down through
// the API is killed and its state file corrupted. The next serve exits 1
// naming the file; serve --reset-state starts from the pinned table, with
// web1 still down and left out of the answer, though its backend accepts.
func TestCorruptStateAfterCrash(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	bin := build(t)
	env := testenv.Start(t, testenv.Options{Backends: 1})
	e := newEdgeHost(t, env, bin, crashConfig, map[string]string{"example.test.zone": crashZone})
	stateDir := e.state
	var ln net.Listener
	if err := env.Backends[0].Do(func() (err error) {
		ln, err = net.Listen("tcp", "198.18.1.1:80")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	start := e.serve
	first := start("first")
	waitServing(t, env)
	waitAnswer(t, env, "startup", []string{"198.18.1.1", "198.18.1.2"})
	// The write token serve made in its state_dir at the first start.
	token, err := api.ReadToken(filepath.Join(stateDir, api.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:9153/api/v1/checks/web1/admin", strings.NewReader("down"))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := env.Edge.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("admin down: %s", resp.Status)
	}
	waitAnswer(t, env, "web1 set down", []string{"198.18.1.2"})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	statePath := filepath.Join(stateDir, "state.json")
	if err := os.WriteFile(statePath, []byte("{\"Version\":1,\x00"), 0o600); err != nil {
		t.Fatal(err)
	}

	refused := start("refused")
	done := make(chan error, 1)
	go func() { done <- refused.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve over a corrupt state file did not exit")
	}
	out, _ := os.ReadFile(filepath.Join(e.dir, "refused.log"))
	if refused.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), statePath) || !strings.Contains(string(out), "--reset-state") {
		t.Fatalf("serve over a corrupt state file: %v, output:\n%s\nwant exit 1 naming %s", err, out, statePath)
	}
	if moved, _ := filepath.Glob(statePath + ".corrupt-*"); len(moved) != 1 {
		t.Errorf("moved aside: %v, want one file", moved)
	}

	start("reset", "--reset-state")
	waitServing(t, env)
	// Longer than a check forgotten healthy would take to be answered.
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if got := answer(t, env); !slices.Equal(got, []string{"198.18.1.2"}) {
			t.Fatalf("after serve --reset-state: answer %v, want web1's address left out", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err = env.Edge.HTTPClient().Get("http://127.0.0.1:9153/api/v1/checks")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var checks struct{ Checks []api.CheckView }
	if err := json.NewDecoder(resp.Body).Decode(&checks); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(checks.Checks, func(c api.CheckView) bool { return c.ID == "web1" }); i < 0 || checks.Checks[i].Admin != "down" || checks.Checks[i].Up {
		t.Errorf("checks after serve --reset-state: %+v, want web1 admin down", checks.Checks)
	}
	log, _ := os.ReadFile(filepath.Join(e.dir, "reset.log"))
	if !strings.Contains(string(log), "--reset-state") || !strings.Contains(string(log), statePath+".corrupt-") {
		t.Errorf("serve --reset-state's log does not warn of the file moved aside:\n%s", log)
	}
}

// answer asks for www.example.test A from the client host, over UDP.
func answer(t *testing.T, env *testenv.Env) []string { return askPath(t, env, "udp", "www") }

// waitAnswer polls the answer until it is want.
func waitAnswer(t *testing.T, env *testenv.Env, what string, want []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := answer(t, env)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: answer %v, want %v", what, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
