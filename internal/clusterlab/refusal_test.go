package clusterlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestVerbRefusalsMatchTheirSentinel answers a verb through the control
// API with each refusal a conductor gives, and checks that the client's
// error matches the refusal's sentinel with errors.Is (and no other), so
// that callers such as examples/multiconductor never match error text.
func TestVerbRefusalsMatchTheirSentinel(t *testing.T) {
	sentinels := []error{conductor.ErrConcurrentActionLimit, baremetal.ErrNodeLocked, statemachine.ErrInvalidTransition, conductor.ErrNoConductor}
	for _, tc := range []struct {
		name   string
		err    error
		want   error // nil: matches none of sentinels
		status int
	}{
		{"action limit", &conductor.ConcurrentActionLimitError{Node: "n1", Action: "deploy", Option: "max_concurrent_deploy", Limit: 1, Count: 1}, conductor.ErrConcurrentActionLimit, http.StatusServiceUnavailable},
		{"locked", &baremetal.NodeLockedError{Node: "n1", Holder: "c2"}, baremetal.ErrNodeLocked, http.StatusConflict},
		{"wrapped transition", fmt.Errorf("conductor: deploy: %w", statemachine.ErrInvalidTransition), statemachine.ErrInvalidTransition, http.StatusConflict},
		{"no conductor", conductor.ErrNoConductor, conductor.ErrNoConductor, http.StatusServiceUnavailable},
		// Text that reads like a limit refusal is not one.
		{"other", errors.New("unable to initiate deploy due to concurrent action limit"), nil, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerVerb(w, tc.err) }))
			defer srv.Close()
			verbs := NewVerbClient([]*Process{{Host: "c1", AgentAPI: srv.URL}})
			_, err := verbs.Call(context.Background(), "n1", "deploy", 250*time.Millisecond)
			var ve *VerbError
			if !errors.As(err, &ve) || ve.Node != "n1" || ve.Verb != "deploy" || ve.Status != tc.status {
				t.Fatalf("Call = %#v, want a *VerbError for deploy of n1 with status %d", err, tc.status)
			}
			for _, s := range sentinels {
				if got := errors.Is(err, s); got != (s == tc.want) {
					t.Errorf("errors.Is(%v, %v) = %v", err, s, got)
				}
			}
		})
	}
}

// TestVerbAccepted checks that an accepted verb is no error.
func TestVerbAccepted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerVerb(w, nil) }))
	defer srv.Close()
	verbs := NewVerbClient([]*Process{{Host: "c1", AgentAPI: srv.URL}})
	if refused, err := verbs.Call(context.Background(), "n1", "manage", time.Second); err != nil || refused != 0 {
		t.Fatalf("Call = %d, %v", refused, err)
	}
}
