package agentclient_test

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/internal/testlog"
)

// TestNilLoggerLogsToSlogDefault leaves HandlerConfig.Logger and
// ServerConfig.Logger nil: a backend failure and the server's own errors
// reach slog.Default(), as everywhere an embedder configures logging.
func TestNilLoggerLogsToSlogDefault(t *testing.T) {
	logs := &testlog.Buffer{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	mem := agenttest.NewBackend()
	_ = mem.AddNode(agentclient.Node{UUID: nodeID, ProvisionState: "inspect wait"}, nodeMAC)
	h, _ := agentclient.NewHandler(failingInspection{mem, nil, errors.New("database on fire")}, agentclient.HandlerConfig{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	e := &handlerEnv{t: t, url: srv.URL, backend: mem}
	if st, body, _ := e.do(http.MethodPost, inspectPath, "1.84", inspectBody("")); st != http.StatusInternalServerError {
		t.Fatalf("HTTP %d, want 500: %s", st, body)
	}
	if !strings.Contains(logs.String(), "database on fire") {
		t.Errorf("slog.Default() got no backend failure from a nil Logger:\n%s", logs.String())
	}

	s := agentclient.NewServer(h, agentclient.ServerConfig{})
	s.ErrorLog.Print("accept failed")
	if !strings.Contains(logs.String(), "accept failed") || !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the server's ErrorLog does not reach slog.Default() at warning level:\n%s", logs.String())
	}
}
