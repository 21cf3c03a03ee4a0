package proto

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestWireNamesAreStable checks that the gRPC service and method names,
// which a plugin built against an earlier release dials, do not depend on
// the Go package the generated code lives in.
func TestWireNamesAreStable(t *testing.T) {
	for got, want := range map[string]string{
		Driver_Describe_FullMethodName: "/anvil.driver.plugin.Driver/Describe",
		Driver_Invoke_FullMethodName:   "/anvil.driver.plugin.Driver/Invoke",
		Driver_ServiceDesc.ServiceName: "anvil.driver.plugin.Driver",
	} {
		if got != want {
			t.Errorf("wire name %q, want %q", got, want)
		}
	}
}

// TestGeneratedCodeIsCurrent regenerates the code from driver.proto into a
// temporary directory and compares it with the committed files.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	gobin := filepath.Join(os.Getenv("HOME"), "go", "bin")
	path := os.Getenv("PATH") + string(os.PathListSeparator) + gobin
	var protoc string
	for _, tool := range []string{"protoc", "protoc-gen-go", "protoc-gen-go-grpc"} {
		p, err := lookPath(tool, path)
		if err != nil {
			t.Skipf("%s not installed; cannot regenerate driver.proto", tool)
		}
		if protoc == "" {
			protoc = p
		}
	}
	out := t.TempDir()
	cmd := exec.Command(protoc, "--proto_path=.", "--go_out="+out, "--go_opt=paths=source_relative",
		"--go-grpc_out="+out, "--go-grpc_opt=paths=source_relative", "driver.proto")
	cmd.Env = append(os.Environ(), "PATH="+path)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	for _, f := range []string{"driver.pb.go", "driver_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate in driver/plugin/internal/proto", f)
		}
	}
}

// lookPath finds an executable named file in the list path.
func lookPath(file, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, file)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}
