package plugin_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/anvilmetal/anvil/driver/plugin"
)

// bins holds the plugin executables built once for the whole test binary.
var bins struct {
	fake, old, future string
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(hostModeEnv); dir != "" {
		os.Exit(runAsHost(dir))
	}
	if sock := os.Getenv(grpcSocketEnv); sock != "" {
		os.Exit(serveBareGRPC(sock))
	}
	dir, err := os.MkdirTemp("", "anvil-plugin-bins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		builds := []struct {
			out, pkg, ldflags string
			dst               *string
		}{
			{"fake", "github.com/anvilmetal/anvil/plugins/fake", "", &bins.fake},
			{"old", "./testdata/versioned", "-X main.name=old -X main.protocolVersions=2 -X main.strayStdout=1", &bins.old},
			{"future", "./testdata/versioned", "-X main.name=future -X main.protocolVersions=9,8", &bins.future},
		}
		// The builds run in parallel: each is mostly a link.
		errs := make([]error, len(builds))
		var wg sync.WaitGroup
		for i, b := range builds {
			out := filepath.Join(dir, b.out)
			args := []string{"build", "-o", out}
			if b.ldflags != "" {
				args = append(args, "-ldflags", b.ldflags)
			}
			cmd := exec.Command("go", append(args, b.pkg)...)
			cmd.Stderr = os.Stderr
			*b.dst = out
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := cmd.Run(); err != nil {
					errs[i] = fmt.Errorf("building %s: %w", b.pkg, err)
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		code := m.Run()
		// Every test closes its hosts: no goroutine may outlive them.
		if err := goleak.Find(); code == 0 && err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			return 1
		}
		return code
	}()
	os.Exit(code)
}

// pluginDir returns a fresh plugin directory holding the given
// executables under their plugin names (name -> built binary).
func pluginDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.Symlink(src, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// hostModeEnv makes the test binary act as a plugin host (see
// TestPluginDiesWithHost): it loads the plugins in the named directory,
// prints their PIDs and waits to be killed.
const hostModeEnv = "ANVIL_PLUGIN_TEST_HOST_DIR"

func runAsHost(dir string) int {
	host := plugin.NewHost(plugin.HostConfig{Dirs: []string{dir}})
	defer host.Close()
	rep, err := host.Discover(context.Background())
	if err != nil || len(rep.Plugins) == 0 {
		fmt.Fprintln(os.Stderr, "host mode:", err, rep.Err())
		return 1
	}
	for _, p := range rep.Plugins {
		fmt.Printf("pid %d\n", p.Status().PID)
	}
	time.Sleep(time.Minute) // the test kills this process long before
	return 0
}
