package conductor_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/anvilmetal/anvil/driver"
)

// TestInternalInfoKeysNamed checks that the engine spells the
// driver_internal_info keys it shares with the drivers through the driver
// package's constants, never as string literals: a literal is how a key
// drifts between the side that writes it and the side that reads it.
func TestInternalInfoKeysNamed(t *testing.T) {
	keys := map[string]string{}
	for name, k := range map[string]string{
		"InternalAgentURL": driver.InternalAgentURL, "InternalAgentToken": driver.InternalAgentToken,
		"InternalAgentTokenPregenerated": driver.InternalAgentTokenPregenerated, "InternalAgentVerifyCA": driver.InternalAgentVerifyCA,
		"InternalAgentVersion": driver.InternalAgentVersion, "InternalAgentLastHeartbeat": driver.InternalAgentLastHeartbeat,
		"InternalAgentStatus": driver.InternalAgentStatus, "InternalAgentStatusMessage": driver.InternalAgentStatusMessage,
	} {
		keys[k] = name
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fs := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fs, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && keys[s] != "" {
				t.Errorf("%s: literal %q, want driver.%s", fs.Position(lit.Pos()), s, keys[s])
			}
			return true
		})
	}
}
