package drivertest

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/steps"
)

// Reference renders the reference part of a driver plugin's README from
// the code: per hardware type the supported and provided implementations,
// each implementation's optional capabilities, the driver_info properties
// with their descriptions, the steps and the vendor methods. Plugin
// READMEs put their own introduction before it and keep the file current
// with CheckGenerated.
func Reference(b driver.Bundle) string {
	var w strings.Builder
	for _, h := range b.HardwareTypes {
		fmt.Fprintf(&w, "\n## Hardware type `%s`\n\n| interface | supported (default first when enabled) | provided here |\n|---|---|---|\n", h.Name)
		for _, k := range driver.Kinds() {
			var here []string
			for _, i := range b.Implementations {
				if i.Kind == k {
					here = append(here, "`"+i.Name+"`")
				}
			}
			sup := h.SupportedFor(k)
			for i := range sup {
				sup[i] = "`" + sup[i] + "`"
			}
			fmt.Fprintf(&w, "| %s | %s | %s |\n", k, strings.Join(sup, ", "), strings.Join(here, ", "))
		}
	}
	w.WriteString("\n## Optional capabilities\n\nFound with `driver.As` on the implementation, in process or through the plugin\n(protocol 3).\n\n| implementation | capabilities |\n|---|---|\n")
	for _, i := range b.Implementations {
		var caps []string
		for _, c := range []struct {
			name string
			ok   bool
		}{
			{"BootModeManager", implements[driver.BootModeManager](i.Impl)},
			{"NMIInjector", implements[driver.NMIInjector](i.Impl)},
			{"IndicatorManager", implements[driver.IndicatorManager](i.Impl)},
			{"SecureBootManager", implements[driver.SecureBootManager](i.Impl)},
			{"VirtualMediaManager", implements[driver.VirtualMediaManager](i.Impl)},
			{"SensorReader", implements[driver.SensorReader](i.Impl)},
			{"HealthReader", implements[driver.HealthReader](i.Impl)},
			{"StepRunner", implements[driver.StepRunner](i.Impl)},
			{"AvailabilityReporter", implements[driver.AvailabilityReporter](i.Impl)},
		} {
			if c.ok {
				caps = append(caps, "`driver."+c.name+"`")
			}
		}
		if len(caps) == 0 {
			caps = []string{"none"}
		}
		fmt.Fprintf(&w, "| %s/`%s` | %s |\n", i.Kind, i.Name, strings.Join(caps, ", "))
	}
	w.WriteString("\n## driver_info properties\n\n| property | required | used by | description |\n|---|---|---|---|\n")
	type prop struct {
		p    driver.Property
		used []string
	}
	var props []*prop
	for _, i := range b.Implementations {
		for _, p := range i.Impl.Properties() {
			idx := slices.IndexFunc(props, func(x *prop) bool { return x.p.Name == p.Name })
			if idx < 0 {
				props = append(props, &prop{p: p})
				idx = len(props) - 1
			}
			props[idx].used = append(props[idx].used, string(i.Kind)+"/"+i.Name)
		}
	}
	slices.SortFunc(props, func(a, b *prop) int { return strings.Compare(a.p.Name, b.p.Name) })
	for _, p := range props {
		if len(p.used) == len(b.Implementations) {
			p.used = []string{"all"}
		}
		req := "no"
		if p.p.Required {
			req = "yes"
		}
		fmt.Fprintf(&w, "| `%s` | %s | %s | %s |\n", p.p.Name, req, strings.Join(p.used, ", "), p.p.Description)
	}
	var stepRows []string
	for _, i := range b.Implementations {
		sp, ok := driver.As[driver.StepProvider](i.Impl)
		if !ok {
			continue
		}
		for _, kind := range []steps.Kind{steps.Clean, steps.Deploy, steps.Service} {
			for _, s := range sp.Steps(kind) {
				var args []string
				for _, a := range slices.Sorted(maps.Keys(s.ArgsInfo)) {
					info := s.ArgsInfo[a]
					req := ""
					if info.Required {
						req = " (required)"
					}
					args = append(args, fmt.Sprintf("`%s`%s: %s", a, req, info.Description))
				}
				stepRows = append(stepRows, fmt.Sprintf("| %s | `%s.%s` | %d | %t | %s |", kind, i.Kind, s.Name, s.Priority, s.RequiresRamdisk, strings.Join(args, "<br>")))
			}
		}
	}
	if len(stepRows) > 0 {
		w.WriteString("\n## Steps\n\n| kind | step | priority | needs ramdisk | arguments |\n|---|---|---|---|---|\n")
		w.WriteString(strings.Join(stepRows, "\n") + "\n")
	}
	for _, i := range b.Implementations {
		v, ok := i.Impl.(driver.VendorInterface)
		if !ok {
			continue
		}
		fmt.Fprintf(&w, "\n## Vendor methods (`%s`)\n\n| method | HTTP | description |\n|---|---|---|\n", i.Name)
		for _, m := range v.Methods() {
			fmt.Fprintf(&w, "| `%s` | %s | %s |\n", m.Name, strings.Join(m.HTTPMethods, ", "), m.Description)
		}
	}
	return w.String()
}

// implements reports whether impl implements T.
func implements[T any](impl driver.Interface) bool {
	_, ok := driver.As[T](impl)
	return ok
}

// CheckGenerated compares the file at path with got. With update set it
// rewrites the file instead; otherwise a difference fails t with the
// command that regenerates it.
func CheckGenerated(t testing.TB, path, got string, update bool, regenerate string) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil || string(want) != got {
		t.Fatalf("%s is out of date (or unreadable: %v); regenerate with: %s", path, err, regenerate)
	}
}
