package driver_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestPackageDocShowsOnlyTheContract keeps `go doc ./driver` to the SDK a
// vendor implements and the Registry: the fake and no-op built-ins live in
// driver/fake, driver/noop and driver/builtin, and driver imports none of
// them (they import driver).
func TestPackageDocShowsOnlyTheContract(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			for _, banned := range []string{"/driver/fake", "/driver/noop", "/driver/builtin"} {
				if strings.HasSuffix(path, banned) {
					t.Errorf("%s imports %s: the built-ins depend on driver, not the other way round", name, path)
				}
			}
		}
	}
	d, err := doc.NewFromFiles(fset, files, "github.com/anvilmetal/anvil/driver")
	if err != nil {
		t.Fatal(err)
	}
	builtinName := regexp.MustCompile(`Fake|^Noop[A-Z]|^No[A-Z]+[a-z]*Interface$|^NewNo|^Builtins$|ManualManagement`)
	check := func(what, name string) {
		if builtinName.MatchString(name) {
			t.Errorf("go doc ./driver lists %s %s, a built-in: it belongs in driver/fake, driver/noop or driver/builtin", what, name)
		}
	}
	for _, ty := range d.Types {
		check("type", ty.Name)
		for _, f := range ty.Funcs {
			check("func", f.Name)
		}
		for _, m := range ty.Methods {
			check("method "+ty.Name+".", m.Name)
		}
	}
	for _, f := range d.Funcs {
		check("func", f.Name)
	}
	for _, group := range append(d.Consts, d.Vars...) {
		for _, n := range group.Names {
			if n != "ErrInjectedFailure" { // a wire-level sentinel the plugin codec carries
				check("value", n)
			}
		}
	}
}
