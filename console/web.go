package console

import "net/http"

// Handler serves the browser page (GET {node-uuid}?token=T), its assets
// (GET assets/...) and the WebSocket (GET {node-uuid}/ws?token=T, binary
// messages of plain bytes both ways) under the prefix it is mounted at
// with http.StripPrefix.
func (m *Manager) Handler() http.Handler { panic("contract") }
