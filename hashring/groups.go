package hashring

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Conductor is one live conductor as the ring builder needs it: its
// hostname, its conductor group and the hardware types it enables (the
// rows of Ironic's conductor_hardware_interfaces for that conductor).
type Conductor struct {
	// Name is the conductor's hostname, the member name on every ring it
	// joins.
	Name string
	// Group is the conductor group; "" is the default group. Groups are
	// compared case-insensitively, as Ironic does.
	Group string
	// HardwareTypes lists the hardware types the conductor enables.
	HardwareTypes []string
	// Weight is the conductor's weight on each of its rings; zero means 1.
	Weight int
}

// GroupKey returns the ring key Ironic uses for a conductor group and a
// hardware type: "<group>:<hardware type>", with the group lower-cased.
func GroupKey(group, hardwareType string) string {
	return lowerASCII(group) + ":" + hardwareType
}

// GroupRings is an immutable set of rings, one per conductor group and
// hardware type, as Ironic's _load_hash_rings builds them. All methods are
// safe for concurrent use; a nil *GroupRings has no rings.
type GroupRings struct {
	cfg   Config
	rings map[string]map[string]*Ring // group → hardware type → ring
	count int
}

// NewGroupRings builds one ring per ("<group>", "<hardware type>") pair
// found in conductors, each holding every conductor of that group that
// enables that hardware type. Pass only live conductors: Ironic builds
// its rings from the conductors that are online and have heartbeat
// within heartbeat_timeout. The result does not depend on the order of
// conductors or of their hardware types. A conductor listed twice, an
// empty name or hardware type, or a hardware type containing ':' returns
// a *MemberError naming the record.
func NewGroupRings(cfg Config, conductors []Conductor) (*GroupRings, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	byKey := map[string]map[string][]Member{}
	seen := make(map[string]int, len(conductors))
	for i, c := range conductors {
		if c.Name == "" {
			return nil, &MemberError{Index: i, Name: c.Name, Field: "name", Reason: "must not be empty"}
		}
		if prev, dup := seen[c.Name]; dup {
			return nil, &MemberError{Index: i, Name: c.Name, Field: "name", Reason: "duplicate of conductor " + strconv.Itoa(prev)}
		}
		seen[c.Name] = i
		group := lowerASCII(c.Group)
		hwSeen := map[string]bool{}
		for _, hw := range c.HardwareTypes {
			switch {
			case hw == "":
				return nil, &MemberError{Index: i, Name: c.Name, Field: "hardware_types", Reason: "hardware type must not be empty"}
			case strings.Contains(hw, ":"):
				return nil, &MemberError{Index: i, Name: c.Name, Field: "hardware_types", Reason: "hardware type " + strconv.Quote(hw) + " must not contain ':'"}
			case hwSeen[hw]:
				continue
			}
			hwSeen[hw] = true
			if byKey[group] == nil {
				byKey[group] = map[string][]Member{}
			}
			byKey[group][hw] = append(byKey[group][hw], Member{Name: c.Name, Weight: c.Weight})
		}
	}
	g := &GroupRings{cfg: cfg, rings: make(map[string]map[string]*Ring, len(byKey))}
	for group, types := range byKey {
		g.rings[group] = make(map[string]*Ring, len(types))
		for hw, members := range types {
			r, err := New(cfg, members...)
			if err != nil {
				// Re-anchor the index on the conductor list.
				var me *MemberError
				if errors.As(err, &me) {
					me.Index = seen[me.Name]
				}
				return nil, err
			}
			g.rings[group][hw] = r
			g.count++
		}
	}
	return g, nil
}

// Ring returns the ring for a conductor group and hardware type, or a
// *NoRingError if no conductor of that group enables that type.
func (g *GroupRings) Ring(group, hardwareType string) (*Ring, error) {
	if g != nil {
		types, ok := g.rings[group]
		if !ok && hasUpperASCII(group) {
			types, ok = g.rings[lowerASCII(group)]
		}
		if ok {
			if r, ok := types[hardwareType]; ok {
				return r, nil
			}
		}
	}
	return nil, &NoRingError{Group: lowerASCII(group), HardwareType: hardwareType}
}

// Get returns the conductor that owns key (a node UUID) among the
// conductors of the node's group that enable its hardware type. It
// allocates nothing when the ring exists and group is lower case.
func (g *GroupRings) Get(group, hardwareType, key string) (string, error) {
	r, err := g.Ring(group, hardwareType)
	if err != nil {
		return "", err
	}
	return r.Get(key)
}

// Keys returns the "<group>:<hardware type>" keys of every ring, sorted.
func (g *GroupRings) Keys() []string {
	if g == nil {
		return nil
	}
	keys := make([]string, 0, g.count)
	for group, types := range g.rings {
		for hw := range types {
			keys = append(keys, group+":"+hw)
		}
	}
	slices.Sort(keys)
	return keys
}

// Len returns the number of rings.
func (g *GroupRings) Len() int {
	if g == nil {
		return 0
	}
	return g.count
}

// Config returns the normalized config every ring was built with.
func (g *GroupRings) Config() Config {
	if g == nil {
		c, _ := Config{}.normalized()
		return c
	}
	return g.cfg
}

func hasUpperASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// lowerASCII lower-cases ASCII letters only, so the result does not
// depend on Unicode tables; it returns s itself when nothing changes.
func lowerASCII(s string) string {
	if !hasUpperASCII(s) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
