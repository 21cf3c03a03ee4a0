package webui

import (
	"fmt"
	"strconv"
)

// parseSmallInt reads a decimal integer in [lo, hi].
func parseSmallInt(s string, lo, hi int) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("%q is not a whole number from %d to %d", s, lo, hi)
	}
	return v, nil
}
