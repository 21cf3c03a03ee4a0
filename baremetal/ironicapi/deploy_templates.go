package ironicapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/steps"
)

// deployTemplateMinVersion is the microversion deploy templates appear
// in (1.55).
const deployTemplateMinVersion = 55

var deployTemplateFieldVersions = map[string]int{
	"uuid": 55, "name": 55, "steps": 55, "extra": 55, "created_at": 55, "updated_at": 55, "links": 55,
}

// deployTemplateListFields are a listing's fields without detail.
var deployTemplateListFields = []string{"uuid", "name", "links"}

// deployTemplateWritable are the fields PATCH may change.
var deployTemplateWritable = map[string]bool{"name": true, "steps": true, "extra": true}

func (h *Handler) deployTemplateRoutes() {
	rt := route{minVersion: deployTemplateMinVersion}
	h.handle("GET /v1/deploy_templates", rt, h.listDeployTemplates)
	h.handle("GET /v1/deploy_templates/{template}", rt, h.getDeployTemplate)
	h.handle("POST /v1/deploy_templates", rt, h.createDeployTemplate)
	h.handle("PATCH /v1/deploy_templates/{template}", rt, h.patchDeployTemplate)
	h.handle("DELETE /v1/deploy_templates/{template}", rt, h.deleteDeployTemplate)
}

// deployTemplateView is t as Ironic shows it; step arguments are masked
// as Ironic masks them.
func (rq *request) deployTemplateView(t *baremetal.DeployTemplate) map[string]any {
	list := make([]map[string]any, 0, len(t.Steps))
	for _, s := range t.Steps {
		list = append(list, map[string]any{"interface": s.Interface, "step": s.Step,
			"args": object(baremetal.MaskSecrets(s.Args)), "priority": s.Priority})
	}
	return map[string]any{
		"uuid": t.UUID, "name": t.Name, "steps": list, "extra": object(t.Extra),
		"created_at": timestamp(t.CreatedAt), "updated_at": timestamp(t.UpdatedAt),
		"links": rq.links("deploy_templates", t.UUID),
	}
}

func (rq *request) deployTemplate() (*baremetal.DeployTemplate, error) {
	ident := rq.r.PathValue("template")
	t, err := rq.h.store.DeployTemplates().Get(rq.ctx, ident)
	if err != nil {
		return nil, notFoundAs(err, "Deploy template %s could not be found.", ident)
	}
	return t, nil
}

// GET /v1/deploy_templates
func (h *Handler) listDeployTemplates(rq *request) error {
	fields, err := rq.parseFields(deployTemplateFieldVersions)
	if err != nil {
		return err
	}
	detail, err := rq.detailFlag(deployTemplateMinVersion, fields)
	if err != nil {
		return err
	}
	page, err := rq.page()
	if err != nil {
		return err
	}
	list, err := h.store.DeployTemplates().List(rq.ctx, baremetal.DeployTemplateFilter{}, page)
	if err != nil {
		return err
	}
	if fields == nil && !detail {
		fields = deployTemplateListFields
	}
	return listReply(rq, "deploy_templates", "deploy_templates", list, page, fields, rq.deployTemplateView,
		func(t *baremetal.DeployTemplate) string { return t.UUID })
}

// GET /v1/deploy_templates/{template}
func (h *Handler) getDeployTemplate(rq *request) error {
	fields, err := rq.parseFields(deployTemplateFieldVersions)
	if err != nil {
		return err
	}
	t, err := rq.deployTemplate()
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, filterView(rq.deployTemplateView(t), fields))
}

// parseDeployTemplate checks a template document as Ironic's schema does
// (steps.ParseTemplate) and copies it into t.
func parseDeployTemplate(doc []byte, t *baremetal.DeployTemplate) error {
	parsed, err := steps.ParseTemplate(doc)
	if err != nil {
		var pe *steps.ParseError
		if !errors.As(err, &pe) {
			return err
		}
		// The template's own keys (index -1) are named too.
		parts := make([]string, 0, len(pe.Problems))
		for _, p := range pe.Problems {
			switch {
			case p.Index < 0 && p.Field != "":
				parts = append(parts, p.Field+": "+p.Problem)
			case p.Index < 0:
				parts = append(parts, p.Problem)
			case p.Field != "":
				parts = append(parts, fmt.Sprintf("step %d: %s: %s", p.Index, p.Field, p.Problem))
			default:
				parts = append(parts, fmt.Sprintf("step %d: %s", p.Index, p.Problem))
			}
		}
		return badRequest("Invalid deploy template: %s", strings.Join(parts, "; "))
	}
	var extra struct {
		UUID  string         `json:"uuid"`
		Extra map[string]any `json:"extra"`
	}
	if err := json.Unmarshal(doc, &extra); err != nil {
		return badRequest("Invalid deploy template: %v", err)
	}
	if extra.UUID != "" {
		t.UUID = extra.UUID
	}
	t.Name, t.Extra, t.Steps = parsed.Name, extra.Extra, nil
	for _, s := range parsed.Steps {
		t.Steps = append(t.Steps, baremetal.DeployTemplateStep{Interface: s.Interface, Step: s.Name, Args: s.Args, Priority: s.Priority})
	}
	return nil
}

func deployTemplateWriteError(err error) error {
	var de *baremetal.DuplicateError
	if errors.As(err, &de) {
		switch de.Field {
		case "name":
			return Errorf(http.StatusConflict, "A deploy template with name %s already exists.", de.Value)
		case "uuid":
			return Errorf(http.StatusConflict, "Deploy template with UUID %s already exists.", de.Value)
		}
	}
	return err
}

// POST /v1/deploy_templates
func (h *Handler) createDeployTemplate(rq *request) error {
	var raw json.RawMessage
	if err := rq.decode(&raw); err != nil {
		return err
	}
	t := &baremetal.DeployTemplate{}
	if err := parseDeployTemplate(raw, t); err != nil {
		return err
	}
	if err := h.store.DeployTemplates().Create(rq.ctx, t); err != nil {
		return deployTemplateWriteError(err)
	}
	return rq.created("deploy_templates", t.UUID, rq.deployTemplateView(t))
}

// PATCH /v1/deploy_templates/{template}
func (h *Handler) patchDeployTemplate(rq *request) error {
	ops, err := rq.decodePatch()
	if err != nil {
		return err
	}
	t, err := rq.deployTemplate()
	if err != nil {
		return err
	}
	list := make([]any, 0, len(t.Steps))
	for _, s := range t.Steps {
		list = append(list, map[string]any{"interface": s.Interface, "step": s.Step, "args": object(s.Args), "priority": s.Priority})
	}
	before := map[string]any{"uuid": t.UUID, "name": t.Name, "steps": list, "extra": object(t.Extra),
		"created_at": nil, "updated_at": nil}
	for _, p := range ops {
		if f := p.rootField(); !deployTemplateWritable[f] {
			if _, known := before[f]; known {
				return badRequest("'/%s' is an internal attribute and can not be updated", f)
			}
		}
	}
	after, err := applyPatch(before, ops)
	if err != nil {
		return err
	}
	delete(after, "created_at")
	delete(after, "updated_at")
	doc, err := json.Marshal(after)
	if err != nil {
		return badRequest("Invalid deploy template: %v", err)
	}
	if err := parseDeployTemplate(doc, t); err != nil {
		return err
	}
	if err := h.store.DeployTemplates().Update(rq.ctx, t); err != nil {
		return deployTemplateWriteError(err)
	}
	return rq.reply(http.StatusOK, rq.deployTemplateView(t))
}

// DELETE /v1/deploy_templates/{template}
func (h *Handler) deleteDeployTemplate(rq *request) error {
	t, err := rq.deployTemplate()
	if err != nil {
		return err
	}
	if err := h.store.DeployTemplates().Delete(rq.ctx, t.UUID); err != nil {
		return notFoundAs(err, "Deploy template %s could not be found.", t.UUID)
	}
	return rq.status(http.StatusNoContent)
}
