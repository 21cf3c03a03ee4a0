package conductor

// Publish hands e to the conductor's watchers as the engine does, so the
// package's external tests can drive Watch and Subscribe without running
// a workflow per event.
func (c *Conductor) Publish(e Event) { c.hub.publish(e) }
