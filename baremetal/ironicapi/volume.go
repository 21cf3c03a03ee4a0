package ironicapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
)

// volumeMinVersion is the microversion volume connectors and targets
// appear in (1.32), at /v1/volume and under /v1/nodes/{node}/volume.
const volumeMinVersion = 32

// volumeKind describes volume connectors or volume targets for the
// handlers both share: Ironic's two controllers differ only in their
// fields, schema and messages.
type volumeKind[T any] struct {
	// path is the collection under /v1/volume and the listing's key
	// ("connectors"); param the name Ironic's controller gives the path
	// UUID ("connector_uuid"); doc the name its schema errors give a
	// body ("connector"); what the not-found subject ("Volume
	// connector").
	path, param, doc, what string
	// fieldVersions are the fields with the microversion introducing
	// each; listFields a listing's fields without detail (Ironic's
	// _DEFAULT_RETURN_FIELDS and links).
	fieldVersions map[string]int
	listFields    []string
	// schema lists the members of Ironic's schema, required the ones it
	// requires, patchable its PATCH_ALLOWED_FIELDS; sortable and
	// unsortable the sort keys and its invalid_sort_key_list.
	schema, required, patchable, sortable, unsortable []string
	// uuid and node point at the model's UUID and node UUID.
	uuid, node func(*T) *string
	// view is the object as Ironic shows it (secrets masked), raw the
	// document a PATCH applies to, set validates a body or patched
	// document (named doc) against the schema and writes its fields
	// but uuid and node_uuid.
	view func(rq *request, x *T) map[string]any
	raw  func(x *T) map[string]any
	set  func(x *T, doc string, body map[string]any) error
	// duplicate is Ironic's 409 for a duplicate that is not the UUID.
	duplicate func(x *T) error
	// collection is the store's collection, read and created through;
	// update and remove go through the conductor, under the node's lock.
	collection func(s baremetal.Store) baremetal.Collection[T, baremetal.VolumeFilter]
	update     func(c *conductor.Conductor, ctx context.Context, x *T) error
	remove     func(c *conductor.Conductor, ctx context.Context, uuid string) error
}

// connectorKind is Ironic's volume connectors controller.
var connectorKind = &volumeKind[baremetal.VolumeConnector]{
	path: "connectors", param: "connector_uuid", doc: "connector", what: "Volume connector",
	fieldVersions: map[string]int{"uuid": 32, "node_uuid": 32, "type": 32, "connector_id": 32, "extra": 32,
		"created_at": 32, "updated_at": 32, "links": 32},
	listFields: []string{"uuid", "node_uuid", "type", "connector_id", "links"},
	schema:     []string{"connector_id", "extra", "node_uuid", "type", "uuid"},
	required:   []string{"connector_id", "node_uuid", "type"},
	patchable:  []string{"connector_id", "extra", "node_uuid", "type"},
	sortable:   baremetal.VolumeConnectorSortKeys(), unsortable: []string{"extra"},
	uuid: func(c *baremetal.VolumeConnector) *string { return &c.UUID },
	node: func(c *baremetal.VolumeConnector) *string { return &c.NodeUUID },
	view: func(rq *request, c *baremetal.VolumeConnector) map[string]any {
		return map[string]any{"uuid": c.UUID, "node_uuid": c.NodeUUID, "type": c.Type, "connector_id": c.ConnectorID,
			"extra": object(c.Extra), "created_at": timestamp(c.CreatedAt), "updated_at": updatedAt(c.UpdatedAt, c.Version),
			"links": rq.links("volume/connectors", c.UUID)}
	},
	raw: func(c *baremetal.VolumeConnector) map[string]any {
		return map[string]any{"id": c.ID, "uuid": c.UUID, "node_uuid": nil, "type": c.Type, "connector_id": c.ConnectorID,
			"extra": object(c.Extra), "created_at": timestamp(c.CreatedAt), "updated_at": timestamp(c.UpdatedAt)}
	},
	set: func(c *baremetal.VolumeConnector, doc string, body map[string]any) error {
		var err error
		if c.ConnectorID, err = schemaString(doc, body, "connector_id", false, 0); err != nil {
			return err
		}
		if c.Type, err = schemaString(doc, body, "type", false, 0); err != nil {
			return err
		}
		c.Extra, err = schemaObject(doc, body, "extra")
		return err
	},
	duplicate: func(c *baremetal.VolumeConnector) error {
		return Errorf(http.StatusConflict, "A volume connector with type %s and connector ID %s already exists.", c.Type, c.ConnectorID)
	},
	collection: baremetal.Store.VolumeConnectors,
	update:     (*conductor.Conductor).UpdateVolumeConnector,
	remove:     (*conductor.Conductor).DeleteVolumeConnector,
}

// targetKind is Ironic's volume targets controller.
var targetKind = &volumeKind[baremetal.VolumeTarget]{
	path: "targets", param: "target_uuid", doc: "target", what: "Volume target",
	fieldVersions: map[string]int{"uuid": 32, "node_uuid": 32, "volume_type": 32, "properties": 32, "boot_index": 32,
		"volume_id": 32, "extra": 32, "created_at": 32, "updated_at": 32, "links": 32},
	listFields: []string{"uuid", "node_uuid", "volume_type", "boot_index", "volume_id", "links"},
	schema:     []string{"boot_index", "extra", "node_uuid", "properties", "volume_id", "volume_type", "uuid"},
	required:   []string{"boot_index", "node_uuid", "volume_id", "volume_type"},
	patchable:  []string{"boot_index", "extra", "node_uuid", "properties", "volume_id", "volume_type"},
	sortable:   baremetal.VolumeTargetSortKeys(), unsortable: []string{"extra", "properties"},
	uuid: func(t *baremetal.VolumeTarget) *string { return &t.UUID },
	node: func(t *baremetal.VolumeTarget) *string { return &t.NodeUUID },
	view: func(rq *request, t *baremetal.VolumeTarget) map[string]any {
		return map[string]any{"uuid": t.UUID, "node_uuid": t.NodeUUID, "volume_type": t.VolumeType,
			"properties": object(baremetal.MaskSecrets(t.Properties)), "boot_index": t.BootIndex, "volume_id": t.VolumeID,
			"extra": object(t.Extra), "created_at": timestamp(t.CreatedAt), "updated_at": updatedAt(t.UpdatedAt, t.Version),
			"links": rq.links("volume/targets", t.UUID)}
	},
	raw: func(t *baremetal.VolumeTarget) map[string]any {
		return map[string]any{"id": t.ID, "uuid": t.UUID, "node_uuid": nil, "volume_type": t.VolumeType,
			"properties": object(t.Properties), "boot_index": t.BootIndex, "volume_id": t.VolumeID,
			"extra": object(t.Extra), "created_at": timestamp(t.CreatedAt), "updated_at": timestamp(t.UpdatedAt)}
	},
	set: func(t *baremetal.VolumeTarget, doc string, body map[string]any) error {
		if v, ok := body["boot_index"]; ok {
			i, isInt := integer(v)
			if !isInt {
				return schemaError(doc, "%s is not of type 'integer'", pyRepr(v))
			}
			t.BootIndex = i
		}
		var err error
		if t.VolumeID, err = schemaString(doc, body, "volume_id", false, 0); err != nil {
			return err
		}
		if t.VolumeType, err = schemaString(doc, body, "volume_type", false, 0); err != nil {
			return err
		}
		if t.Properties, err = schemaObject(doc, body, "properties"); err != nil {
			return err
		}
		t.Extra, err = schemaObject(doc, body, "extra")
		return err
	},
	duplicate: func(t *baremetal.VolumeTarget) error {
		return Errorf(http.StatusConflict, "A volume target with boot index '%d' for the same node already exists.", t.BootIndex)
	},
	collection: baremetal.Store.VolumeTargets,
	update:     (*conductor.Conductor).UpdateVolumeTarget,
	remove:     (*conductor.Conductor).DeleteVolumeTarget,
}

func (h *Handler) volumeRoutes() {
	rt := route{minVersion: volumeMinVersion}
	h.handle("GET /v1/volume", rt, h.getVolumeRoot)
	h.handle("GET /v1/nodes/{node}/volume", rt, h.getVolumeRoot)
	volumeKindRoutes(h, rt, connectorKind)
	volumeKindRoutes(h, rt, targetKind)
}

// volumeKindRoutes registers the endpoints of one volume resource. Under
// a node only the listing exists: the rest is Ironic's malformed URI.
func volumeKindRoutes[T any](h *Handler, rt route, k *volumeKind[T]) {
	top, under := "/v1/volume/"+k.path, "/v1/nodes/{node}/volume/"+k.path
	h.handle("GET "+top, rt, listVolumes(h, k))
	h.handle("GET "+under, rt, listVolumes(h, k))
	h.handle("GET "+top+"/{id}", rt, getVolumeItem(k, false))
	h.handle("GET "+under+"/{id}", rt, getVolumeItem(k, true))
	h.handle("POST "+top, rt, createVolumeItem(h, k))
	h.handle("PATCH "+top+"/{id}", rt, patchVolumeItem(h, k))
	h.handle("DELETE "+top+"/{id}", rt, deleteVolumeItem(h, k))
	malformed := func(*request) error { return badRequest("Malformed request URI.") }
	h.handle("POST "+under, rt, malformed)
	h.handle("PATCH "+under+"/{id}", rt, malformed)
	h.handle("DELETE "+under+"/{id}", rt, malformed)
}

// GET /v1/volume and /v1/nodes/{node}/volume: links to the collections,
// the node named as the path names it, as Ironic does.
func (h *Handler) getVolumeRoot(rq *request) error {
	resource, args := "volume", ""
	if node := rq.r.PathValue("node"); node != "" {
		resource, args = "nodes", node+"/volume/"
	}
	return rq.reply(http.StatusOK, map[string]any{
		"links":      rq.links(resource, args),
		"connectors": rq.links(resource, args+"connectors"),
		"targets":    rq.links(resource, args+"targets"),
	})
}

// volumeItem finds the connector or target the path names.
func volumeItem[T any](rq *request, k *volumeKind[T]) (*T, error) {
	id, err := rq.pathUUID("id", k.param)
	if err != nil {
		return nil, err
	}
	x, err := k.collection(rq.h.store).Get(rq.ctx, id)
	if err != nil {
		return nil, notFoundAs(err, k.what+" %s could not be found.", id)
	}
	return x, nil
}

// GET /v1/volume/{connectors,targets}, and under /v1/nodes/{node}/volume
func listVolumes[T any](h *Handler, k *volumeKind[T]) handlerFunc {
	return func(rq *request) error {
		if err := rq.checkQuery("node", "marker", "limit", "sort_key", "sort_dir", "fields", "detail"); err != nil {
			return err
		}
		fields, err := rq.parseFields(k.fieldVersions)
		if err != nil {
			return err
		}
		detail, _, err := rq.detailParam()
		if err != nil {
			return err
		}
		if fields != nil && detail {
			return badRequest("Can't fetch a subset of fields with 'detail' set")
		}
		if fields == nil && !detail {
			fields = k.listFields
		}
		page, err := rq.sortedPage(k.sortable, k.unsortable)
		if err != nil {
			return err
		}
		if page.Marker != "" {
			if _, err := k.collection(h.store).Get(rq.ctx, page.Marker); err != nil {
				return notFoundAs(err, k.what+" %s could not be found.", page.Marker)
			}
		}
		res := "volume/" + k.path
		nodeIdent := rq.r.URL.Query().Get("node")
		if under := rq.r.PathValue("node"); under != "" {
			nodeIdent, res = under, "nodes/"+under+"/volume/"+k.path
		}
		var f baremetal.VolumeFilter
		if nodeIdent != "" {
			n, err := h.store.GetNode(rq.ctx, nodeIdent)
			if err != nil {
				return notFoundAs(err, "Node %s could not be found.", nodeIdent)
			}
			f.NodeUUID = n.UUID
		}
		list, err := k.collection(h.store).List(rq.ctx, f, page)
		if err != nil {
			return err
		}
		return listReply(rq, k.path, res, list, page, fields, func(x *T) map[string]any { return k.view(rq, x) },
			func(x *T) string { return *k.uuid(x) })
	}
}

// GET /v1/volume/{connectors,targets}/{id}; under a node it is found,
// then refused as a malformed URI, in Ironic's order.
func getVolumeItem[T any](k *volumeKind[T], underNode bool) handlerFunc {
	return func(rq *request) error {
		x, err := volumeItem(rq, k)
		if err != nil {
			return err
		}
		if underNode {
			return badRequest("Malformed request URI.")
		}
		fields, err := rq.parseFields(k.fieldVersions)
		if err != nil {
			return err
		}
		return rq.reply(http.StatusOK, filterView(k.view(rq, x), fields))
	}
}

// volumeBody validates a create body or patched document as Ironic's
// schema and argument validators do, and writes it onto x: the schema
// (doc names the document in errors), then the node_uuid and uuid
// formats.
func volumeBody[T any](k *volumeKind[T], x *T, doc string, body map[string]any) error {
	if err := schemaMembers(doc, body, k.schema, k.required); err != nil {
		return err
	}
	if err := k.set(x, doc, body); err != nil {
		return err
	}
	node, err := schemaString(doc, body, "node_uuid", false, 0)
	if err != nil {
		return err
	}
	id, err := schemaString(doc, body, "uuid", true, 0)
	if err != nil {
		return err
	}
	if !looksLikeUUID(node) {
		return badRequest("Expected UUID for node_uuid: %s", node)
	}
	if id != "" && !looksLikeUUID(id) {
		return badRequest("Expected UUID for uuid: %s", id)
	}
	*k.node(x), *k.uuid(x) = strings.ToLower(node), strings.ToLower(id)
	return nil
}

// volumeWriteError maps the errors of a connector or target write to
// Ironic's codes and messages.
func volumeWriteError[T any](k *volumeKind[T], x *T, err error) error {
	var de *baremetal.DuplicateError
	var vse *conductor.VolumeStateError
	var ife *baremetal.InvalidFieldError
	switch {
	case errors.As(err, &de) && de.Field == "uuid":
		return Errorf(http.StatusConflict, "A %s with UUID %s already exists.", strings.ToLower(k.what), de.Value)
	case errors.As(err, &de):
		return k.duplicate(x)
	case errors.As(err, &vse):
		// Python prints a node without a known power state as None.
		state := string(vse.PowerState)
		if state == "" {
			state = "None"
		}
		return badRequest("The requested action \"%s\" can not be performed on node \"%s\" while it is in state \"%s\".", vse.Action, vse.Node, state)
	case errors.As(err, &ife) && ife.Kind != "page":
		return badRequest("Invalid %s %s: expected %s", strings.ToLower(k.what), ife.Field, ife.Expected)
	}
	return notFoundAs(err, k.what+" %s could not be found.", *k.uuid(x))
}

// POST /v1/volume/{connectors,targets}
func createVolumeItem[T any](h *Handler, k *volumeKind[T]) handlerFunc {
	return func(rq *request) error {
		var body map[string]any
		if err := rq.decode(&body); err != nil {
			return err
		}
		if body == nil {
			return schemaError(k.doc, "%s is not of type 'object'", pyRepr(nil))
		}
		x := new(T)
		if err := volumeBody(k, x, k.doc, body); err != nil {
			return err
		}
		n, err := h.store.GetNode(rq.ctx, *k.node(x))
		if errors.Is(err, baremetal.ErrNotFound) {
			return badRequest("Invalid input for field/attribute node_uuid. Value: '%s'. ", body["node_uuid"])
		}
		if err != nil {
			return err
		}
		*k.node(x) = n.UUID
		if err := k.collection(h.store).Create(rq.ctx, x); err != nil {
			return volumeWriteError(k, x, err)
		}
		return rq.created("volume/"+k.path, *k.uuid(x), k.view(rq, x))
	}
}

// PATCH /v1/volume/{connectors,targets}/{id}: the fields Ironic allows;
// a new node_uuid must name a node of the same owner, and the change
// is made by the conductor under that node's lock.
func patchVolumeItem[T any](h *Handler, k *volumeKind[T]) handlerFunc {
	return func(rq *request) error {
		ops, err := rq.decodePatch()
		if err != nil {
			return err
		}
		x, err := volumeItem(rq, k)
		if err != nil {
			return err
		}
		var newNode any
		for _, p := range ops {
			if !slices.Contains(k.patchable, p.rootField()) {
				return badRequest("Cannot patch %s. Only the following can be updated: %s", p.Path, strings.Join(k.patchable, ", "))
			}
			if p.Path == "/node_uuid" && p.Op != "remove" {
				if s, ok := p.Value.(string); !ok || !looksLikeUUID(s) {
					return badRequest("Expected a UUID for node_uuid, but received %s.", pyStr(p.Value))
				}
				if newNode == nil {
					newNode = p.Value
				}
			}
		}
		node, err := h.store.GetNode(rq.ctx, *k.node(x))
		if err != nil {
			return err
		}
		if newNode != nil {
			moved, err := h.store.GetNode(rq.ctx, newNode.(string))
			if err != nil || moved.Owner != node.Owner {
				return badRequest("Unable to apply the requested node_uuid '%s'. Requested value was invalid.", newNode)
			}
			node = moved
		}
		after, err := applyPatch(k.raw(x), ops)
		if err != nil {
			return err
		}
		after["node_uuid"] = node.UUID
		for f := range after {
			if !slices.Contains(k.schema, f) {
				delete(after, f)
			}
		}
		if err := volumeBody(k, x, "patch", after); err != nil {
			return err
		}
		if err := k.update(h.c, rq.ctx, x); err != nil {
			return volumeWriteError(k, x, err)
		}
		return rq.reply(http.StatusOK, k.view(rq, x))
	}
}

// DELETE /v1/volume/{connectors,targets}/{id}, by the conductor under
// the node's lock.
func deleteVolumeItem[T any](h *Handler, k *volumeKind[T]) handlerFunc {
	return func(rq *request) error {
		x, err := volumeItem(rq, k)
		if err != nil {
			return err
		}
		if err := k.remove(h.c, rq.ctx, *k.uuid(x)); err != nil {
			return volumeWriteError(k, x, err)
		}
		return rq.status(http.StatusNoContent)
	}
}

// pyStr writes a decoded JSON value as Python's str does.
func pyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyRepr(v)
}
