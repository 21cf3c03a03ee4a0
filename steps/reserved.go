package steps

import "fmt"

// CheckReservedArgs checks the arguments of a user step with a reserved
// name the way Decide reads them when the step runs, so that a request
// that would fail then can be refused when it is made: wait's seconds, when
// given, must be a non-negative integer (a number or a string of digits).
// The other reserved steps take no argument the conductor reads. It returns
// nil for a step whose name is not reserved.
func CheckReservedArgs(kind Kind, s Step) error {
	if s.Name != StepWait {
		return nil
	}
	raw, has := s.Args["seconds"]
	if !has {
		return nil
	}
	if _, ok := waitSeconds(raw); !ok {
		return fmt.Errorf("steps: %s step wait: argument seconds must be a non-negative integer, got %s", kind, reprValue(raw))
	}
	return nil
}
