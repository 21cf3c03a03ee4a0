package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxConfigBytes bounds the configuration file.
const maxConfigBytes = 1 << 20

// iniValue is one "name = value" line of an INI file.
type iniValue struct {
	Section, Name, Value string
	Line                 int
}

// iniFile is a parsed INI file: its values in file order.
type iniFile struct {
	Path   string
	Values []iniValue
}

// ConfigSyntaxError is a line of the configuration file that is not INI.
type ConfigSyntaxError struct {
	Path   string
	Line   int
	Reason string
}

func (e *ConfigSyntaxError) Error() string {
	return fmt.Sprintf("anvild: config file %s line %d: %s", e.Path, e.Line, e.Reason)
}

// readINI reads the INI file at path (at most 1 MiB).
func readINI(path string) (*iniFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("anvild: config file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("anvild: config file %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("anvild: config file %s: larger than %d bytes", path, maxConfigBytes)
	}
	return parseINI(path, data)
}

// parseINI parses the INI dialect oslo.config reads: "[section]" headers,
// "name = value" or "name: value" lines, whole-line comments starting with
// "#" or ";", blank lines, and continuation lines (indented, after a
// value) appended to the previous value with a newline. Section and option
// names are kept as written (oslo.config's are case-sensitive, [DEFAULT]
// upper-case). A value before any section, a line that is neither, or an
// unterminated header is a *ConfigSyntaxError naming the line.
func parseINI(path string, data []byte) (*iniFile, error) {
	out := &iniFile{Path: path}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	section := ""
	line := 0
	prev := -1 // index in out.Values of the value a continuation extends
	for sc.Scan() {
		line++
		raw := strings.TrimRight(sc.Text(), " \t\r")
		trimmed := strings.TrimSpace(raw)
		switch {
		case trimmed == "":
			prev = -1
			continue
		case trimmed[0] == '#' || trimmed[0] == ';':
			continue
		case raw[0] == ' ' || raw[0] == '\t':
			if prev < 0 {
				return nil, &ConfigSyntaxError{path, line, "indented line with no value before it to continue"}
			}
			v := &out.Values[prev]
			if v.Value == "" {
				v.Value = trimmed
			} else {
				v.Value += "\n" + trimmed
			}
			continue
		case trimmed[0] == '[':
			if !strings.HasSuffix(trimmed, "]") {
				return nil, &ConfigSyntaxError{path, line, "section header without a closing ]"}
			}
			section = strings.TrimSpace(trimmed[1 : len(trimmed)-1])
			if section == "" {
				return nil, &ConfigSyntaxError{path, line, "empty section name"}
			}
			prev = -1
			continue
		}
		i := strings.IndexAny(trimmed, "=:")
		if i <= 0 {
			return nil, &ConfigSyntaxError{path, line, "expected [section] or name = value"}
		}
		if section == "" {
			return nil, &ConfigSyntaxError{path, line, "option before any [section]"}
		}
		name := strings.TrimSpace(trimmed[:i])
		value := strings.TrimSpace(trimmed[i+1:])
		out.Values = append(out.Values, iniValue{Section: section, Name: name, Value: unquote(value), Line: line})
		prev = len(out.Values) - 1
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &ConfigSyntaxError{path, line + 1, "line longer than 64 KiB"}
		}
		return nil, fmt.Errorf("anvild: config file %s: %w", path, err)
	}
	return out, nil
}

// unquote strips one pair of matching quotes, as oslo.config does.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}
