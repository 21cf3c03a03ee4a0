package driver_test

import (
	"context"
	"testing"

	"github.com/anvilmetal/anvil/driver"
)

// nmiOnly is a management implementation that decides its capabilities
// at run time: it provides an NMIInjector through Capability and nothing
// else, and has no capability method itself.
type nmiOnly struct {
	driver.ManagementInterface
	injected *int
}

type nmiFunc func() error

func (f nmiFunc) InjectNMI(context.Context, *driver.Task) error { return f() }

func (m nmiOnly) Capability(target any) bool {
	p, ok := target.(*driver.NMIInjector)
	if ok {
		*p = nmiFunc(func() error { *m.injected++; return nil })
	}
	return ok
}

// sensorsByType has the SensorReader capability by its Go type.
type sensorsByType struct{ driver.ManagementInterface }

func (sensorsByType) Sensors(context.Context, *driver.Task) ([]driver.SensorReading, error) {
	return nil, nil
}

// TestAsFindsCapabilitiesByTypeAndByProvider checks both ways a
// capability is found, and that As answers no for what neither gives.
func TestAsFindsCapabilitiesByTypeAndByProvider(t *testing.T) {
	var n int
	prov := nmiOnly{injected: &n}
	nmi, ok := driver.As[driver.NMIInjector](prov)
	if !ok {
		t.Fatal("As missed the NMIInjector a CapabilityProvider provides")
	}
	if err := nmi.InjectNMI(context.Background(), &driver.Task{}); err != nil || n != 1 {
		t.Errorf("provided NMIInjector: err %v, calls %d", err, n)
	}
	if _, ok := driver.As[driver.SensorReader](prov); ok {
		t.Error("As found a SensorReader the provider does not provide")
	}
	if _, ok := driver.As[driver.SensorReader](sensorsByType{}); !ok {
		t.Error("As missed a SensorReader the type implements")
	}
	if _, ok := driver.As[driver.NMIInjector](sensorsByType{}); ok {
		t.Error("As found an NMIInjector on a type without one")
	}
	if _, ok := driver.As[driver.NMIInjector](nil); ok {
		t.Error("As found a capability on a nil implementation")
	}
}
