package clusterlab

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
)

// TestBMCPowerOnsAtOnce: two conductors may power one machine into its
// ramdisk within milliseconds (a late retry and a takeover). The lab's
// BMC carries them out one after the other, each a reset, as a real one
// does; it used to answer the second with 500 because the first boot's
// agent still held the machine's place in the agent server, and the
// chaos test failed the node's cleaning on it.
func TestBMCPowerOnsAtOnce(t *testing.T) {
	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "lab.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	lab, err := NewLab(LabConfig{Store: store, Ring: conductor.RingOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	const node = "5299881e-6d14-46be-97c8-38a1bbb7eca9"
	body := []byte(`{"on":true,"ramdisk":true,"macs":["52:54:00:00:00:01"],"conductor":"c1"}`)
	var wg sync.WaitGroup
	codes := make([]int, 16)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(lab.URL()+"/bmc/"+node, "application/json", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusNoContent {
			t.Errorf("power-on %d answered %d, want 204", i, c)
		}
	}
	lab.mu.Lock()
	boots, running := len(lab.boots[node]), lab.running[node] != nil
	lab.mu.Unlock()
	if boots != len(codes) || !running {
		t.Errorf("%d boots (one running: %v), want %d with the last running", boots, running, len(codes))
	}
}
