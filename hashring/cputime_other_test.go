//go:build !linux

package hashring

import "time"

// threadCPU is not available off Linux; the benchmarks then report wall
// time only.
func threadCPU() (stop func() (time.Duration, bool)) {
	return func() (time.Duration, bool) { return 0, false }
}
