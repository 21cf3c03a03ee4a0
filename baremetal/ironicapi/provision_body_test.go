package ironicapi_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/statemachine"
)

// spoolLab is a lab whose handler spools config drives into a directory
// of the test's, with one available node ready to deploy.
func spoolLab(t *testing.T, name string) (*lab, string, string) {
	t.Helper()
	dir := t.TempDir()
	l := newLab(t, func(_ *conductor.Options, ao *ironicapi.Options) { ao.TempDir = dir })
	id := newNode(t, l, name, `,"instance_info":{"image_source":"http://192.0.2.10/i"}`)
	setState(t, l, id, statemachine.Available, "", nil)
	return l, id, dir
}

// assertNoSpool fails t when a spooled config drive is left in dir.
func assertNoSpool(t *testing.T, dir, after string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("after %s: %s left in the spool directory", after, e.Name())
	}
}

// putBody sends a provision body of any size without copying it.
func putBody(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest("PUT", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.89")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestProvisionConfigDriveHeapBelowBody: handling a 64 MiB provision
// body allocates well under the body's size, measured against a small
// request's allocation in the same run. The body decoded whole cost
// several times its size (raw message, string, decoded base64).
func TestProvisionConfigDriveHeapBelowBody(t *testing.T) {
	l, id, dir := spoolLab(t, "heap")
	url := l.srv.URL + "/v1/nodes/" + id + "/states/provision"
	// An image string of the form bodybench sends: valid base64 that
	// is no gzip stream, so the conductor's check refuses it after it
	// went through the whole path (API, spool file, conductor).
	const size = 64 << 20
	big := []byte(`{"target":"active","configdrive":"`)
	big = append(big, bytes.Repeat([]byte("A"), size-len(big)-2)...)
	big = append(big, `"}`...)
	small := []byte(`{"target":"active","configdrive":"AAAAAAAA"}`)

	alloc := func(body []byte) (uint64, int, string) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		st, resp := putBody(t, url, body)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, st, resp
	}
	base, st, resp := alloc(small)
	if st != 400 || !strings.Contains(faultString(t, resp), "configdrive") {
		t.Fatalf("small undecodable drive: %d %s", st, resp)
	}
	got, st, resp := alloc(big)
	if st != 400 || !strings.Contains(faultString(t, resp), "configdrive") {
		t.Fatalf("64 MiB undecodable drive: %d %s", st, resp)
	}
	growth := int64(got) - int64(base)
	t.Logf("allocated %d B for a %d B body (small request: %d B)", growth, len(big), base)
	if growth > size/2 {
		t.Errorf("a %d B provision body allocated %d B more than a small one, want under %d", len(big), growth, size/2)
	}
	assertNoSpool(t, dir, "the large request")
}

// TestProvisionConfigDriveReachesConductor: a base64 gzipped drive,
// wrapped and with JSON escapes, is stored as the string it encodes.
func TestProvisionConfigDriveReachesConductor(t *testing.T) {
	l, id, dir := spoolLab(t, "intact")
	noise := make([]byte, 256<<10)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	enc := gzipBase64(t, string(noise))
	var wrapped strings.Builder
	for i := 0; i < len(enc); i += 76 {
		wrapped.WriteString(enc[i:min(i+76, len(enc))])
		wrapped.WriteByte('\n')
	}
	want := wrapped.String()
	// The JSON text escapes the newlines, every '/' and every '+'.
	jsonText := strings.NewReplacer("\n", `\n`, "/", `\/`, "+", `\u002b`).Replace(want)
	if !strings.Contains(jsonText, `\/`) || !strings.Contains(jsonText, `\u002b`) {
		t.Fatal("fixture drive has no escapes")
	}
	st, resp := putBody(t, l.srv.URL+"/v1/nodes/"+id+"/states/provision", []byte(`{"configdrive":"`+jsonText+`","target":"active"}`))
	if st != 202 {
		t.Fatalf("deploy with a config drive: %d %s", st, resp)
	}
	assertNoSpool(t, dir, "an accepted deploy")
	n, err := l.c.Store().GetNode(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := n.InstanceInfo["configdrive"].(string)
	if got != want {
		t.Fatalf("stored config drive of %d bytes differs from the %d sent", len(got), len(want))
	}
}

// TestProvisionBodyRefusals: malformed bodies and wrong types are
// Ironic's 400 with a message saying what is wrong, and no spool file
// outlives the request.
func TestProvisionBodyRefusals(t *testing.T) {
	l, id, dir := spoolLab(t, "bad")
	url := l.srv.URL + "/v1/nodes/" + id + "/states/provision"
	for _, tc := range []struct{ name, body, want string }{
		{"empty", ``, "The request body is empty"},
		{"truncated string", `{"target":"active","configdrive":"AAAA`, "Invalid JSON in the request body: unexpected EOF"},
		{"truncated object", `{"target":"active",`, "Invalid JSON in the request body"},
		{"control character", "{\"target\":\"active\",\"configdrive\":\"AA\x01A\"}", "Invalid JSON in the request body"},
		{"bad escape", `{"target":"active","configdrive":"AA\qA"}`, "Invalid JSON in the request body"},
		{"bad unicode escape", `{"target":"active","configdrive":"AA\u00zzA"}`, "Invalid JSON in the request body"},
		{"trailing data", `{"target":"active","configdrive":"AAAA"} x`, "data after the document"},
		{"missing comma", `{"configdrive":"AAAA" "target":"active"}`, "Invalid JSON in the request body"},
		{"not an object", `["active"]`, "Invalid JSON in the request body"},
		{"malformed value", `{"target":"active","clean_steps":[1,}`, "Invalid JSON in the request body"},
		{"malformed secret", `{"target":"rescue","rescue_password":["hunter2",}`, `Invalid JSON in the request body: malformed value of "rescue_password".`},
		{"unknown key", `{"target":"active","configdrive":"AAAA","colour":1}`, `Unknown argument: "colour"`},
		{"number drive", `{"target":"active","configdrive":12}`, "Invalid configdrive format"},
		{"list drive", `{"target":"active","configdrive":["AAAA"]}`, "Invalid configdrive format"},
		{"not base64", `{"target":"active","configdrive":"no*base64"}`, "Invalid configdrive format: it is neither a JSON, nor a URL, nor a base64 string"},
		{"escaped non-base64", `{"target":"active","configdrive":"AA\u00e9A"}`, "Invalid configdrive format"},
		{"target not a string", `{"target":1,"configdrive":"AAAA"}`, "Invalid input for field/attribute target"},
		{"drive for provide", `{"target":"provide","configdrive":"AAAA"}`, "can not be performed"},
		{"base64 not gzip", `{"target":"active","configdrive":"QUFBQUFBQUE="}`, "configdrive"},
	} {
		st, resp := putBody(t, url, []byte(tc.body))
		if strings.Contains(resp, "hunter2") {
			t.Errorf("%s: the answer echoes the secret: %s", tc.name, resp)
		}
		if st != 400 {
			t.Errorf("%s: %d %s, want 400", tc.name, st, resp)
		} else if msg := faultString(t, resp); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q, want it to say %q", tc.name, msg, tc.want)
		}
		assertNoSpool(t, dir, tc.name)
	}
	// A URL passes the API's check and the conductor's.
	st, resp := putBody(t, url, []byte(`{"target":"active","configdrive":"http:\/\/192.0.2.10\/drive.iso"}`))
	if st != 202 {
		t.Fatalf("config drive URL: %d %s", st, resp)
	}
	n, err := l.c.Store().GetNode(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.InstanceInfo["configdrive"]; got != "http://192.0.2.10/drive.iso" {
		t.Fatalf("stored config drive URL %v", got)
	}
	assertNoSpool(t, dir, "a URL drive")
}

// TestProvisionSpoolRemovedOnDisconnect: a client that goes away in the
// middle of its config drive leaves no spool file.
func TestProvisionSpoolRemovedOnDisconnect(t *testing.T) {
	l, id, dir := spoolLab(t, "gone")
	c, err := net.Dial("tcp", strings.TrimPrefix(l.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head := `{"target":"active","configdrive":"`
	fmt.Fprintf(c, "PUT /v1/nodes/%s/states/provision HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-OpenStack-Ironic-API-Version: 1.89\r\nContent-Length: %d\r\n\r\n%s",
		id, 8<<20, head)
	chunk := bytes.Repeat([]byte("A"), 256<<10)
	if _, err := c.Write(chunk); err != nil {
		t.Fatal(err)
	}
	// waitSpool waits for the spool directory to hold n files.
	waitSpool := func(n int, what string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d files in the spool directory, want %d", what, len(ents), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitSpool(1, "config drive arriving")
	_ = c.Close()
	waitSpool(0, "client gone")
}
