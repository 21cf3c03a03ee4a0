package webui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/webui"
)

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// deploy takes a new machine through manage, provide and deploy.
func (s *stack) deploy(name, mac string) *baremetal.Node {
	s.t.Helper()
	n := s.enrollMachine(name, mac)
	for _, step := range []struct {
		verb func(context.Context, string) error
		want statemachine.State
	}{{s.c.Manage, statemachine.Manageable}, {s.c.Provide, statemachine.Available}} {
		if err := step.verb(s.ctx, n.UUID); err != nil {
			s.t.Fatal(err)
		}
		s.waitFor(n.UUID, step.want)
	}
	if err := s.c.Deploy(s.ctx, n.UUID, conductor.DeployOptions{}); err != nil {
		s.t.Fatal(err)
	}
	return s.waitFor(n.UUID, statemachine.Active)
}

func lane(t *testing.T, p webui.Phase, name string) []webui.Bar {
	t.Helper()
	for _, l := range p.Lanes {
		if l.Name == name {
			return l.Bars
		}
	}
	t.Fatalf("phase %s has no lane %s", p.Name, name)
	return nil
}

// TestDeployTimeline deploys a simulated machine that boots from the
// network and reads its timeline from the UI's server: the deploy phase
// has the boot stages of its boot in order, its steps in order, the wait
// for the agent drawn as a wait, and the agent's heartbeats.
func TestDeployTimeline(t *testing.T) {
	s := newStack(t, conductor.Options{})
	n := s.deploy("timeline-1", "52:54:00:aa:00:01")
	resp, body := get(t, s.srv.URL+"/ui/api/nodes/"+n.Name+"/timeline")
	if resp.StatusCode != 200 {
		t.Fatalf("timeline: %s %s", resp.Status, body)
	}
	var tl webui.Timeline
	if err := json.Unmarshal([]byte(body), &tl); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range tl.Phases {
		names = append(names, p.Name+"→"+p.Result)
	}
	if !slices.Equal(names, []string{"manage→manageable", "clean→available", "deploy→active"}) {
		t.Fatalf("phases %v", names)
	}
	deploy := tl.Phases[2]
	var stages []string
	for _, b := range lane(t, deploy, "boot") {
		stages = append(stages, b.Label)
	}
	want := []string{"boot prepared", "dhcp discover", "dhcp offer", "dhcp ack", "tftp sent", "boot script", "kernel", "ramdisk", "agent lookup", "agent heartbeat"}
	// An agent may look up more than once (a lookup meeting the locked
	// node is answered 409 and retried).
	if !slices.Equal(slices.Compact(stages), want) {
		t.Fatalf("deploy boot stages %v, want %v", stages, want)
	}
	checkOrdered(t, "boot", lane(t, deploy, "boot"))
	var stepNames []string
	for _, b := range lane(t, deploy, "steps") {
		stepNames = append(stepNames, b.Label)
		if b.Failed || b.End < b.Start {
			t.Errorf("step bar %+v", b)
		}
	}
	checkOrdered(t, "steps", lane(t, deploy, "steps"))
	for _, w := range []string{"deploy.deploy", "deploy.write_image", "deploy.boot_instance"} {
		if !slices.Contains(stepNames, w) {
			t.Errorf("deploy steps %v lack %s", stepNames, w)
		}
	}
	if i, j := slices.Index(stepNames, "deploy.write_image"), slices.Index(stepNames, "deploy.boot_instance"); i > j {
		t.Errorf("write_image after boot_instance: %v", stepNames)
	}
	waits := 0
	for _, b := range lane(t, deploy, "state") {
		if b.Kind == "wait" && b.Label == "wait call-back" {
			waits++
		}
	}
	if waits == 0 {
		t.Errorf("no wait drawn in %+v", lane(t, deploy, "state"))
	}
	if len(lane(t, deploy, "agent")) == 0 {
		t.Error("no heartbeat drawn")
	}
	// Boot stages start before the steps the agent runs.
	if lane(t, deploy, "boot")[0].Start > lane(t, deploy, "steps")[len(stepNames)-1].Start {
		t.Error("the boot starts after the last step")
	}
	resp, body = get(t, s.srv.URL+"/ui/api/nodes/"+n.UUID+"/timeline?phases=1")
	var one webui.Timeline
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &one) != nil || len(one.Phases) != 1 || one.Phases[0].Name != "deploy" {
		t.Fatalf("timeline?phases=1: %s %s", resp.Status, body)
	}
	for _, bad := range []string{"phases=0", "phases=51", "phases=x"} {
		if resp, _ := get(t, s.srv.URL+"/ui/api/nodes/"+n.UUID+"/timeline?"+bad); resp.StatusCode != 400 {
			t.Errorf("timeline?%s: %s, want 400", bad, resp.Status)
		}
	}
	if resp, _ := get(t, s.srv.URL+"/ui/api/nodes/nope/timeline"); resp.StatusCode != 404 {
		t.Errorf("timeline of an unknown node: %s", resp.Status)
	}
}

func checkOrdered(t *testing.T, what string, bars []webui.Bar) {
	t.Helper()
	for i := 1; i < len(bars); i++ {
		if bars[i].Start < bars[i-1].Start {
			t.Fatalf("%s bars out of order at %d: %+v", what, i, bars)
		}
	}
}

// sseReader reads server-sent events.
type sseReader struct {
	r    *bufio.Reader
	body io.Closer
}

func openStream(t *testing.T, url string) *sseReader {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream %s: %s %q %s", url, resp.Status, resp.Header.Get("Content-Type"), b)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseReader{r: bufio.NewReader(resp.Body), body: resp.Body}
}

// next returns the next event's name ("" for a message) and data.
func (s *sseReader) next() (string, string, error) {
	name, data := "", ""
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if data != "" || name != "" {
				return name, data, nil
			}
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// until reads patches until one satisfies ok, within a minute.
func (s *sseReader) until(t *testing.T, ok func(webui.Row) bool) webui.Row {
	t.Helper()
	found := make(chan webui.Row, 1)
	go func() {
		for {
			_, data, err := s.next()
			if err != nil {
				close(found)
				return
			}
			var rows []webui.Row
			if json.Unmarshal([]byte(data), &rows) != nil {
				continue
			}
			for _, r := range rows {
				if ok(r) {
					found <- r
					return
				}
			}
		}
	}()
	select {
	case r, open := <-found:
		if !open {
			t.Fatal("stream ended")
		}
		return r
	case <-time.After(time.Minute):
		s.body.Close()
		t.Fatal("no such patch within a minute")
	}
	return webui.Row{}
}

// TestFleetSnapshotAndStream reads the fleet's snapshot and follows its
// stream: a transition, a maintenance change (re-read whole) and a
// deletion arrive as patches; the number of streams is bounded.
func TestFleetSnapshotAndStream(t *testing.T) {
	s := newStack(t, conductor.Options{})
	var uuids []string
	for i := range 25 {
		n, err := s.c.Enroll(s.ctx, &baremetal.Node{Name: fmt.Sprintf("snap-%02d", i), Driver: "fake-hardware"})
		if err != nil {
			t.Fatal(err)
		}
		uuids = append(uuids, n.UUID)
	}
	resp, body := get(t, s.srv.URL+"/ui/api/fleet")
	if resp.StatusCode != 200 {
		t.Fatalf("fleet: %s %s", resp.Status, body)
	}
	var snap struct {
		Conductor string
		Nodes     []webui.Row
	}
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Conductor != "webui-test" || len(snap.Nodes) != 25 {
		t.Fatalf("snapshot of %d nodes by %q", len(snap.Nodes), snap.Conductor)
	}
	for _, r := range snap.Nodes {
		if r.ProvisionState == nil || *r.ProvisionState != "enroll" || r.Conductor == nil || *r.Conductor != "webui-test" || r.Maintenance == nil || r.At == 0 {
			t.Fatalf("snapshot row %+v", r)
		}
	}

	st := openStream(t, s.srv.URL+"/ui/api/events")
	if err := s.c.Manage(s.ctx, uuids[3]); err != nil {
		t.Fatal(err)
	}
	r := st.until(t, func(r webui.Row) bool {
		return r.UUID == uuids[3] && r.ProvisionState != nil && *r.ProvisionState == "manageable"
	})
	if r.LastError != nil || r.Conductor == nil || *r.Conductor != "webui-test" {
		t.Fatalf("patch of the move to manageable %+v", r)
	}
	if err := s.c.SetMaintenance(s.ctx, uuids[4], true, "fan"); err != nil {
		t.Fatal(err)
	}
	r = st.until(t, func(r webui.Row) bool { return r.UUID == uuids[4] && r.Maintenance != nil })
	if !*r.Maintenance || r.Name == nil || *r.Name != "snap-04" {
		t.Fatalf("maintenance patch %+v: want the whole row, in maintenance", r)
	}
	if err := s.c.Delete(s.ctx, uuids[5]); err != nil {
		t.Fatal(err)
	}
	st.until(t, func(r webui.Row) bool { return r.UUID == uuids[5] && r.Deleted })

	// One node's stream carries that node only.
	one := openStream(t, s.srv.URL+"/ui/api/events?node=snap-06")
	if err := s.c.Manage(s.ctx, uuids[7]); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Manage(s.ctx, uuids[6]); err != nil {
		t.Fatal(err)
	}
	first := one.until(t, func(webui.Row) bool { return true })
	if first.UUID != uuids[6] {
		t.Fatalf("node stream carried %s", first.UUID)
	}
	if resp, _ := get(t, s.srv.URL+"/ui/api/events?node=nope"); resp.StatusCode != 404 {
		t.Fatalf("stream of an unknown node: %s", resp.Status)
	}
}

// TestStreamsBounded checks that streams beyond MaxStreams are refused
// with 503 and Retry-After, and that a closed stream frees its place.
func TestStreamsBounded(t *testing.T) {
	s := newStack(t, conductor.Options{})
	ui, err := webui.New(webui.Options{Conductor: s.c, MaxStreams: 1, Prefix: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/x/", ui)
	srv := newServer(t, mux)
	resp, err := http.Get(srv + "/x/api/events")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first stream: %v %v", resp, err)
	}
	second, _ := get(t, srv+"/x/api/events")
	if second.StatusCode != 503 || second.Header.Get("Retry-After") == "" {
		t.Fatalf("second stream: %s, Retry-After %q", second.Status, second.Header.Get("Retry-After"))
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		again, err := http.Get(srv + "/x/api/events")
		if err != nil {
			t.Fatal(err)
		}
		again.Body.Close()
		if again.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream after the first closed: %s", again.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPages checks the pages, their headers and the assets.
func TestPages(t *testing.T) {
	s := newStack(t, conductor.Options{})
	n := s.enrollMachine("page-1", "52:54:00:aa:00:02")
	for _, tc := range []struct {
		path   string
		status int
		has    string
	}{
		{"/ui/", 200, `src="/ui/assets/fleet.js"`},
		{"/ui/nodes/" + n.UUID, 200, `data-node="` + n.UUID + `"`},
		{"/ui/nodes/page-1", 200, `data-console="/console"`},
		{"/ui/nodes/nope", 404, ""},
		{"/ui/assets/fleet.js", 200, "EventSource"},
		{"/ui/assets/style.css", 200, ".row"},
		{"/ui/assets/fleet.html", 404, ""},
		{"/ui/assets/", 404, ""},
		{"/ui/api/nodes/nope/console", 404, ""},
	} {
		resp, body := get(t, s.srv.URL+tc.path)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.has) {
			t.Errorf("GET %s: %s, want %d with %q", tc.path, resp.Status, tc.status, tc.has)
		}
		if tc.status == 200 && strings.HasSuffix(resp.Header.Get("Content-Type"), "html; charset=utf-8") &&
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s: no content security policy", tc.path)
		}
	}
	resp, err := http.DefaultClient.Do(mustRequest(t, "GET", s.srv.URL+"/ui"))
	if err != nil || resp.Request.URL.Path != "/ui/" {
		t.Fatalf("GET /ui: %v, ended at %v", err, resp.Request.URL)
	}
	resp.Body.Close()
	// The console link: none while disabled, a tokened page once running.
	_, body := get(t, s.srv.URL+"/ui/api/nodes/"+n.UUID+"/console")
	if !strings.Contains(body, `"enabled":false`) || strings.Contains(body, "token") {
		t.Fatalf("console link of a disabled console: %s", body)
	}
	if err := s.c.SetConsoleMode(s.ctx, n.UUID, true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, body = get(t, s.srv.URL+"/ui/api/nodes/"+n.UUID+"/console")
		if strings.Contains(body, `"url":"/console/`+n.UUID+`?token=`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("console link of an enabled console: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestStreamOutlivesServerTimeouts serves the stream from a server whose
// read and write timeouts are short (anvild's are minutes): a stream
// open for longer still delivers changes.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	s := newStack(t, conductor.Options{})
	n, err := s.c.Enroll(s.ctx, &baremetal.Node{Name: "long-stream", Driver: "fake-hardware"})
	if err != nil {
		t.Fatal(err)
	}
	ui, err := webui.New(webui.Options{Conductor: s.c})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(ui)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	st := openStream(t, srv.URL+"/ui/api/events")
	time.Sleep(time.Second)
	if err := s.c.Manage(s.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	st.until(t, func(r webui.Row) bool {
		return r.UUID == n.UUID && r.ProvisionState != nil && *r.ProvisionState == "manageable"
	})
}
