package driver

// CapabilityProvider is implemented by an implementation whose optional
// capabilities are decided at run time rather than by its Go type. A
// plugin proxy is one: it has exactly the capabilities its plugin
// advertised, and one Go type per combination of capabilities would
// double with each new capability. Implementations whose capabilities are
// fixed need not implement it; their methods are found by As through a
// type assertion.
type CapabilityProvider interface {
	// Capability reports whether the implementation has the optional
	// capability whose interface target points to (a *NMIInjector, a
	// *StepPreparer, ...) and, when it does, stores the implementation of
	// that capability in *target. It leaves *target alone and returns
	// false for a capability it lacks or a target it does not know.
	Capability(target any) bool
}

// As returns impl's optional capability T, one of the capability
// interfaces (StepProvider, StepRunner, StepPreparer, BootModeManager,
// NMIInjector, IndicatorManager, SecureBootManager, SensorReader,
// HealthReader, VirtualMediaManager, AvailabilityReporter), and whether impl has it. It answers yes when
// impl's type implements T, or when impl is a CapabilityProvider that
// provides T. Callers look capabilities up with As, never with a bare
// type assertion, so that plugin proxies answer exactly as the
// implementation inside the plugin does.
func As[T any](impl Interface) (T, bool) {
	var c T
	if impl == nil {
		return c, false
	}
	if v, ok := impl.(T); ok {
		return v, true
	}
	if p, ok := impl.(CapabilityProvider); ok && p.Capability(&c) {
		return c, true
	}
	var zero T
	return zero, false
}
