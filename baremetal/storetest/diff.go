package storetest

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
)

// DiffNodes compares two nodes field by field (times with time.Equal,
// maps and slices deeply) and returns one line per differing field, or ""
// when they are equal. The lines name fields only, never values, so a
// diff of nodes with secrets is safe to print.
func DiffNodes(want, got *baremetal.Node) string {
	if want == nil || got == nil {
		if want == got {
			return ""
		}
		return "one node is nil"
	}
	wv, gv := reflect.ValueOf(*want), reflect.ValueOf(*got)
	typ := wv.Type()
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		a, b := wv.Field(i).Interface(), gv.Field(i).Interface()
		if ta, ok := a.(time.Time); ok {
			if !ta.Equal(b.(time.Time)) {
				out = append(out, fmt.Sprintf("%s: want %v, got %v", f.Name, ta, b))
			}
			continue
		}
		if !reflect.DeepEqual(a, b) {
			if baremetal.IsSensitiveKey(f.Name) || f.Type.Kind() == reflect.Map {
				out = append(out, fmt.Sprintf("%s differs", f.Name))
			} else {
				out = append(out, fmt.Sprintf("%s: want %v, got %v", f.Name, a, b))
			}
		}
	}
	return strings.Join(out, "\n")
}
