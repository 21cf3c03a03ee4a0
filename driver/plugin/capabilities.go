package plugin

import (
	"github.com/anvilmetal/anvil/driver"
)

// capability is one optional capability an implementation may advertise
// in Describe: its wire name, the interface kind allowed to advertise it
// ("" for any), the first protocol version that carries it, how the
// plugin side detects it and how a proxy provides it.
type capability struct {
	name  string
	kind  driver.Kind
	since int
	// has reports whether a plugin-side implementation has it.
	has func(driver.Interface) bool
	// provide stores the proxy's implementation of the capability in
	// target when target points to the capability's interface. It is nil
	// for step_runner, which every proxy has by its Go type (ExecuteStep
	// refuses a step when the plugin did not advertise it).
	provide func(x *proxy, target any) bool
}

// capabilities returns the capability table, in the order Describe lists
// capabilities. Adding a capability adds one row here, its method
// wrapper in proxy.go and its dispatch case in server.go.
func capabilities() []capability {
	return []capability{
		{name: "step_runner", since: 1, has: has[driver.StepRunner]},
		capabilityOf(driver.KindDeploy, "step_preparer", 2, func(x *proxy) driver.StepPreparer { return preparerCap{x} }),
		capabilityOf(driver.KindManagement, "boot_mode", 2, func(x *proxy) driver.BootModeManager { return bootModeCap{x} }),
		capabilityOf(driver.KindManagement, "nmi", 3, func(x *proxy) driver.NMIInjector { return nmiCap{x} }),
		capabilityOf(driver.KindManagement, "indicator", 3, func(x *proxy) driver.IndicatorManager { return indicatorCap{x} }),
		capabilityOf(driver.KindManagement, "secure_boot", 3, func(x *proxy) driver.SecureBootManager { return secureBootCap{x} }),
		capabilityOf(driver.KindManagement, "sensors", 3, func(x *proxy) driver.SensorReader { return sensorsCap{x} }),
		capabilityOf(driver.KindManagement, "virtual_media", 3, func(x *proxy) driver.VirtualMediaManager { return vmediaCap{x} }),
		capabilityOf(driver.KindManagement, "health", 3, func(x *proxy) driver.HealthReader { return healthCap{x} }),
	}
}

// capabilityOf returns the row of capability interface T, which
// implementations of kind advertise as name since protocol version since,
// and which a proxy provides as impl(x).
func capabilityOf[T any](kind driver.Kind, name string, since int, impl func(*proxy) T) capability {
	return capability{
		name: name, kind: kind, since: since, has: has[T],
		provide: func(x *proxy, target any) bool {
			p, ok := target.(*T)
			if ok {
				*p = impl(x)
			}
			return ok
		},
	}
}

// has reports whether impl has the optional capability T.
func has[T any](impl driver.Interface) bool {
	_, ok := driver.As[T](impl)
	return ok
}

// advertised returns the capabilities impl of kind advertises.
func advertised(kind driver.Kind, impl driver.Interface) []string {
	var out []string
	for _, c := range capabilities() {
		if (c.kind == "" || c.kind == kind) && c.has(impl) {
			out = append(out, c.name)
		}
	}
	return out
}

// accepted returns the capabilities of an implementation of kind that the
// host honours from a plugin's advertised list: known ones, allowed for
// the kind, carried by the negotiated protocol version. Anything else a
// plugin advertises is ignored, as an older host would.
func accepted(kind driver.Kind, list []string, version int) []capability {
	var out []capability
	for _, c := range capabilities() {
		for _, name := range list {
			if name == c.name && (c.kind == "" || c.kind == kind) && c.since <= version {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// Capability provides the optional capabilities the plugin advertised for
// the implementation (see driver.CapabilityProvider): one proxy type
// serves every combination.
func (x *proxy) Capability(target any) bool {
	for _, c := range x.caps {
		if c.provide != nil && c.provide(x, target) {
			return true
		}
	}
	return false
}
