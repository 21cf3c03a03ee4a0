package sqlstore

import (
	"database/sql"
	"fmt"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
)

type volumeConnectorRow struct {
	rowBase
	Type        string         `db:"type"`
	ConnectorID string         `db:"connector_id"`
	Extra       sql.NullString `db:"extra"`
}

func (r *volumeConnectorRow) connector() (*baremetal.VolumeConnector, error) {
	c := &baremetal.VolumeConnector{Type: r.Type, ConnectorID: r.ConnectorID}
	return c, decodeColumns("volume_connector", r.UUID, jsonColumn{"extra", r.Extra, &c.Extra})
}

// volumeText checks the text fields of a volume resource (valid UTF-8;
// their lengths are the model's Validate).
func volumeText(kind, uuid string, fields ...[2]string) error {
	for _, f := range fields {
		if err := checkText(&baremetal.Node{UUID: uuid}, f[0], f[1], 0); err != nil {
			return &baremetal.InvalidFieldError{Kind: kind, Ident: uuid, Field: f[0], Expected: "valid UTF-8 text without NUL bytes"}
		}
	}
	return nil
}

// volumeConnectorArgs validates c and returns the values of type,
// connector_id and extra.
func volumeConnectorArgs(c *baremetal.VolumeConnector) ([]any, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := volumeText("volume_connector", c.UUID, [2]string{"type", c.Type}, [2]string{"connector_id", c.ConnectorID}); err != nil {
		return nil, err
	}
	js, err := encodeColumns("volume_connector", c.UUID, jsonValue{"extra", c.Extra})
	if err != nil {
		return nil, err
	}
	return []any{c.Type, c.ConnectorID, js[0]}, nil
}

// volumeConnectors is the volume connector table; a (type,
// connector_id) pair is unique across the store, as in Ironic.
var volumeConnectors = newCrud(crud[baremetal.VolumeConnector, volumeConnectorRow]{
	kind: "volume_connector", noun: "volume connector", plural: "volume connectors",
	table: "volume_connectors", alias: "v.", node: nodeRequired,
	selectSQL: "SELECT v.id, v.uuid, n.uuid AS node_uuid, v.type, v.connector_id, v.extra, v.created_at, v.updated_at, v.version " +
		"FROM volume_connectors v JOIN nodes n ON n.id = v.node_id",
	cols: []string{"type", "connector_id", "extra"},
	sortCols: map[string]byte{"uuid": 't', "node_id": 'i', "type": 't', "connector_id": 't',
		"created_at": 'i', "updated_at": 'i'},
	clone:  (*baremetal.VolumeConnector).Clone,
	args:   volumeConnectorArgs,
	decode: (*volumeConnectorRow).connector,
	unique: func(c *baremetal.VolumeConnector) []uniqueField {
		return []uniqueField{{field: "connector_id", cond: "type = ? AND connector_id = ?", args: []any{c.Type, c.ConnectorID},
			value: c.Type + " " + c.ConnectorID}}
	},
})

type volumeTargetRow struct {
	rowBase
	VolumeType string         `db:"volume_type"`
	Properties sql.NullString `db:"properties"`
	BootIndex  int            `db:"boot_index"`
	VolumeID   string         `db:"volume_id"`
	Extra      sql.NullString `db:"extra"`
}

func (r *volumeTargetRow) target() (*baremetal.VolumeTarget, error) {
	t := &baremetal.VolumeTarget{VolumeType: r.VolumeType, BootIndex: r.BootIndex, VolumeID: r.VolumeID}
	return t, decodeColumns("volume_target", r.UUID, jsonColumn{"properties", r.Properties, &t.Properties},
		jsonColumn{"extra", r.Extra, &t.Extra})
}

// volumeTargetArgs validates t and returns the values of volume_type,
// properties, boot_index, volume_id and extra.
func volumeTargetArgs(t *baremetal.VolumeTarget) ([]any, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if err := volumeText("volume_target", t.UUID, [2]string{"volume_type", t.VolumeType}, [2]string{"volume_id", t.VolumeID}); err != nil {
		return nil, err
	}
	js, err := encodeColumns("volume_target", t.UUID, jsonValue{"properties", t.Properties}, jsonValue{"extra", t.Extra})
	if err != nil {
		return nil, err
	}
	return []any{t.VolumeType, js[0], t.BootIndex, t.VolumeID, js[1]}, nil
}

// volumeTargets is the volume target table; a boot index is unique per
// node, as in Ironic.
var volumeTargets = newCrud(crud[baremetal.VolumeTarget, volumeTargetRow]{
	kind: "volume_target", noun: "volume target", plural: "volume targets",
	table: "volume_targets", alias: "v.", node: nodeRequired,
	selectSQL: "SELECT v.id, v.uuid, n.uuid AS node_uuid, v.volume_type, v.properties, v.boot_index, v.volume_id, v.extra, " +
		"v.created_at, v.updated_at, v.version FROM volume_targets v JOIN nodes n ON n.id = v.node_id",
	cols: []string{"volume_type", "properties", "boot_index", "volume_id", "extra"},
	sortCols: map[string]byte{"uuid": 't', "node_id": 'i', "volume_type": 't', "boot_index": 'i', "volume_id": 't',
		"created_at": 'i', "updated_at": 'i'},
	clone:  (*baremetal.VolumeTarget).Clone,
	args:   volumeTargetArgs,
	decode: (*volumeTargetRow).target,
	unique: func(t *baremetal.VolumeTarget) []uniqueField {
		return []uniqueField{{field: "boot_index", cond: "node_id = (SELECT id FROM nodes WHERE uuid = ?) AND boot_index = ?",
			args: []any{strings.ToLower(t.NodeUUID), t.BootIndex}, value: fmt.Sprint(t.BootIndex)}}
	},
})

// VolumeConnectors implements baremetal.ResourceStore.
func (s *Store) VolumeConnectors() baremetal.Collection[baremetal.VolumeConnector, baremetal.VolumeFilter] {
	return bind(s, volumeConnectors, volumeWhere)
}

// VolumeTargets implements baremetal.ResourceStore.
func (s *Store) VolumeTargets() baremetal.Collection[baremetal.VolumeTarget, baremetal.VolumeFilter] {
	return bind(s, volumeTargets, volumeWhere)
}

// volumeWhere is the conditions of a volume connector or target listing.
func volumeWhere(f baremetal.VolumeFilter) (filters, error) { return ofNode(f.NodeUUID), nil }
