package baremetal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// TestNoPointerHelper checks that the model package exports no pointer
// helper for NodeFilter's optional fields: Go 1.26's new(expr) is the
// idiom (NodeFilter{Reserved: new(false)}), and a second spelling of it
// is one more name for a reader to learn.
func TestNoPointerHelper(t *testing.T) {
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
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "Ptr" {
				t.Errorf("%s: func Ptr: use new(expr)", fs.Position(fn.Pos()))
			}
		}
	}
}
