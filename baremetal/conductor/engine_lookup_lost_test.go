package conductor_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// lostAnswerStore is a store whose token writes by a lookup (the
// one-statement write and release, UpdateNodeReleasing) meet a database
// that goes away: each planned fault either commits the write and loses
// its answer (the connection drops after the commit) or drops the
// connection before the write reaches the database. Either way the caller
// gets an unavailable error and cannot tell which happened.
type lostAnswerStore struct {
	baremetal.Store
	rs baremetal.ReleasingNodeStore

	mu sync.Mutex
	// faults are the next UpdateNodeReleasing calls' fates: true commits
	// and loses the answer, false fails before the write.
	faults []bool
}

func (s *lostAnswerStore) plan(faults ...bool) {
	s.mu.Lock()
	s.faults = append(s.faults, faults...)
	s.mu.Unlock()
}

func (s *lostAnswerStore) UpdateNodeRecording(ctx context.Context, n *baremetal.Node, holder string, e *baremetal.HistoryEntry) error {
	return s.rs.(baremetal.RecordingNodeStore).UpdateNodeRecording(ctx, n, holder, e)
}

func (s *lostAnswerStore) UpdateNodeReleasing(ctx context.Context, n *baremetal.Node, holder string, e *baremetal.HistoryEntry) error {
	s.mu.Lock()
	fault, lose := false, false
	if len(s.faults) > 0 {
		fault, lose = true, s.faults[0]
		s.faults = s.faults[1:]
	}
	s.mu.Unlock()
	lost := &baremetal.StoreUnavailableError{Op: "updating node " + n.UUID, Err: io.ErrUnexpectedEOF}
	switch {
	case !fault:
		return s.rs.UpdateNodeReleasing(ctx, n, holder, e)
	case lose:
		// The caller's copy is left as a failed write leaves it.
		if err := s.rs.UpdateNodeReleasing(ctx, n.Clone(), holder, e); err != nil {
			return err
		}
		return lost
	default:
		return lost
	}
}

// lookupAgent is one GET /v1/lookup of node uuid: the status and the
// token of the answer.
func lookupAgent(t *testing.T, apiURL, uuid string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, apiURL+"/v1/lookup?node_uuid="+uuid, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.68")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var lr agentclient.LookupResponse
	_ = json.Unmarshal(body, &lr)
	return resp.StatusCode, lr.Config.AgentToken
}

// TestLookupTokenLostToTheDatabaseIsReissued: a lookup whose token write
// meets a database outage answers an error, so its token reaches no
// agent, even when the write committed (its answer lost with the
// connection). The agent's next lookup must get a usable token, not the
// masked value that locks it out for good (the chaos test's database cut
// failed a cleaning so, at its callback timeout). A token is still
// disclosed once: a third lookup gets the masked value, and a token the
// conductor did not leave unanswered is never replaced.
func TestLookupTokenLostToTheDatabaseIsReissued(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		faults []bool // the lookups' write faults before the one that answers
	}{
		{"committed, answer lost", []bool{true}},
		{"not written", []bool{false}},
		{"committed, then a rewrite not written", []bool{true, false}},
		{"committed twice, answers lost", []bool{true, true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, store, apiURL := lostAnswerHarness(t)
			uuid := h.waitingNode("lookup-lost")
			store.plan(tc.faults...)
			for i := range tc.faults {
				if status, tok := lookupAgent(t, apiURL, uuid); status != http.StatusInternalServerError || tok != "" {
					t.Fatalf("lookup %d (write fault): HTTP %d with a token of %d characters; want 500 without a token", i+1, status, len(tok))
				}
				h.waitReleased(uuid)
			}
			status, tok := lookupAgent(t, apiURL, uuid)
			if status != http.StatusOK || len(tok) < 32 || tok == agentclient.MaskedToken {
				t.Fatalf("lookup after the lost answers: HTTP %d, token %q; want 200 with a fresh token", status, mask(tok))
			}
			got, err := h.store.GetNode(h.ctx, uuid)
			h.must(err)
			if stored, _ := got.DriverInternalInfo[driver.InternalAgentToken].(string); stored != tok {
				t.Fatal("the token the lookup returned is not the token the conductor stored")
			}
			if got.Reservation != "" {
				t.Fatalf("node still reserved by %q after the lookup", got.Reservation)
			}
			if status, tok := lookupAgent(t, apiURL, uuid); status != http.StatusOK || tok != agentclient.MaskedToken {
				t.Fatalf("second lookup after the answered one: HTTP %d, token %q; want 200 with the masked token", status, mask(tok))
			}
		})
	}

	// A token that reached an agent some other way (here written by
	// another conductor's lookup) after this conductor's answer was lost
	// is not replaced.
	t.Run("token since given out elsewhere", func(t *testing.T) {
		t.Parallel()
		h, store, apiURL := lostAnswerHarness(t)
		uuid := h.waitingNode("lookup-lost-other")
		store.plan(true)
		if status, _ := lookupAgent(t, apiURL, uuid); status != http.StatusInternalServerError {
			t.Fatalf("lookup with a lost answer: HTTP %d, want 500", status)
		}
		h.waitReleased(uuid)
		cur, err := h.store.GetNode(h.ctx, uuid)
		h.must(err)
		other := "another-conductors-token-of-forty-characters"
		cur.DriverInternalInfo[driver.InternalAgentToken] = other
		h.must(h.store.UpdateNode(h.ctx, cur, ""))
		if status, tok := lookupAgent(t, apiURL, uuid); status != http.StatusOK || tok != agentclient.MaskedToken {
			t.Fatalf("lookup of a node whose token was given out: HTTP %d, token %q; want 200 with the masked token", status, mask(tok))
		}
		got, err := h.store.GetNode(h.ctx, uuid)
		h.must(err)
		if stored, _ := got.DriverInternalInfo[driver.InternalAgentToken].(string); stored != other {
			t.Fatal("a token given out elsewhere was replaced")
		}
	})
}

func mask(tok string) string {
	if len(tok) >= 32 {
		return "<a token>"
	}
	return tok
}

// lostAnswerHarness is a conductor over a lostAnswerStore serving the
// agent API; it returns the harness, the store and the API's URL.
func lostAnswerHarness(t *testing.T) (*harness, *lostAnswerStore, string) {
	t.Helper()
	inner := openStore(t, false)
	rs, ok := inner.(baremetal.ReleasingNodeStore)
	if !ok {
		t.Fatalf("%T does not write and release in one statement", inner)
	}
	store := &lostAnswerStore{Store: inner, rs: rs}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewUnstartedServer(nil)
	t.Cleanup(api.Close)
	c, err := conductor.New(store, reg, conductor.Options{Hostname: uniqueName("lookup-lost"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := serveAgentAPI(t, api, c)
	return &harness{t: t, store: inner, c: c, ctx: ctx}, store, api.URL
}

// waitingNode enrolls a node and puts it in deploy wait with no agent
// token, as a deploy leaves it while its ramdisk boots.
func (h *harness) waitingNode(name string) string {
	h.t.Helper()
	n := h.manageable(name, fake.Name)
	cur, err := h.store.GetNode(h.ctx, n.UUID)
	h.must(err)
	cur.ProvisionState, cur.TargetProvisionState = statemachine.DeployWait, statemachine.Active
	delete(cur.DriverInternalInfo, driver.InternalAgentToken)
	h.must(h.store.UpdateNode(h.ctx, cur, ""))
	return n.UUID
}

// waitReleased waits until node uuid is not reserved: a lookup that met
// the outage releases it (at once, or by its background retry).
func (h *harness) waitReleased(uuid string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := h.store.GetNode(h.ctx, uuid)
		if err == nil && n.Reservation == "" {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("node %s still reserved (%v) 10s after a lookup", uuid, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
