package conductor_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestPeriodicTasksAreNotExported reads the package's non-test sources:
// the periodic tasks run on the conductor's own loops and are exported
// only to the package's tests (export_test.go), not to embedders.
func TestPeriodicTasksAreNotExported(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]bool{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && fd.Name.IsExported() {
				methods[fd.Name.Name] = true
			}
		}
	}
	for _, task := range []struct{ exported, unexported string }{
		{"CheckTimeouts", "checkTimeouts"},
		{"SyncPowerStates", "syncPowerStates"},
		{"RecoverPowerFailures", "recoverPowerFailures"},
		{"CheckOrphanNodes", "checkOrphanNodes"},
		{"SyncLocalState", "syncLocalState"},
	} {
		if methods[task.exported] {
			t.Errorf("%s is exported; the conductor runs it on its own loop, so it belongs behind export_test.go as %s", task.exported, task.unexported)
		}
	}
	if !methods["Watch"] || !methods["SetPowerState"] {
		t.Fatalf("the parse found no exported methods it should (Watch, SetPowerState): %d found", len(methods))
	}
}
