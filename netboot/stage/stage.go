// Package stage names the stages of a network boot and decides, from the
// stages a node has reached, whether its boot has stalled and where.
//
// The boot server (package netboot) records a Record for each thing it
// serves a machine: a DHCP offer, a TFTP file, an iPXE script, the kernel
// and the ramdisk. The conductor records the agent's lookup and first
// heartbeat. A Record lands in the node's history and Watch stream, and
// when a node waits too long the conductor calls Check on the node's
// records to fail it early with a message that says where the boot stopped
// ("DHCP offered 192.0.2.23 at 10:42:03, TFTP undionly.kpxe sent at
// 10:42:04, no iPXE script request in 600 s"), instead of after the whole
// 30-minute callback timeout.
//
// The package is pure: no I/O, and time comes in as arguments.
package stage

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Stage is one step of a network boot, in the order a machine reaches
// them. The values are the history event names.
type Stage string

// The stages. Prepared is recorded when a boot interface writes a node's
// boot configuration: the records after the last Prepared are the current
// boot attempt.
const (
	Prepared       Stage = "boot prepared"
	DHCPDiscover   Stage = "dhcp discover"
	DHCPOffer      Stage = "dhcp offer"
	DHCPAck        Stage = "dhcp ack"
	TFTPSent       Stage = "tftp sent"
	TFTPFailed     Stage = "tftp failed"
	Script         Stage = "boot script"
	Kernel         Stage = "kernel"
	Ramdisk        Stage = "ramdisk"
	File           Stage = "http file"
	AgentLookup    Stage = "agent lookup"
	AgentHeartbeat Stage = "agent heartbeat"
	// LocalBoot is recorded when the boot server tells a machine to boot
	// from its local disk (an active or available node, or an instance
	// boot configuration).
	LocalBoot Stage = "local boot"
	// Fallback is recorded when a machine nobody enrolled is sent to the
	// fallback (discovery) script.
	Fallback Stage = "fallback"
)

// EventType is the history event type of boot-stage entries.
const EventType = "boot"

// Record is one stage a machine reached. Node is empty for a machine the
// boot server has no configuration for.
type Record struct {
	Node     string        `json:"node,omitempty"`
	MAC      string        `json:"mac,omitempty"`
	Stage    Stage         `json:"stage"`
	At       time.Time     `json:"at"`
	Addr     string        `json:"addr,omitempty"` // the address offered, or the client's address
	Arch     string        `json:"arch,omitempty"` // the client's firmware, e.g. "bios", "efi-x86_64", "efi-x86_64-http"
	File     string        `json:"file,omitempty"` // the file or URL path served
	Bytes    int64         `json:"bytes,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	Err      string        `json:"error,omitempty"`
	// Note, when set, is the record's phrase as it was first written (a
	// record read back from node history carries only its phrase).
	Note string `json:"note,omitempty"`
}

// Observer receives stage records. ObserveBootStage must not block: the
// boot server calls it from its packet and request handlers.
type Observer interface {
	ObserveBootStage(Record)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Record)

// ObserveBootStage calls f(r).
func (f ObserverFunc) ObserveBootStage(r Record) { f(r) }

// Phrase says what happened in a few words, without the time:
// "DHCP offered 192.0.2.23 to 52:54:00:12:34:56 (bios)".
func (r Record) Phrase() string {
	if r.Note != "" {
		return r.Note
	}
	size := ""
	if r.Bytes > 0 {
		size = fmt.Sprintf(" (%s in %s)", bytesText(r.Bytes), r.Duration.Round(time.Millisecond))
	}
	who := r.MAC
	if r.Arch != "" {
		who = strings.TrimSpace(who + " (" + r.Arch + ")")
	}
	switch r.Stage {
	case Prepared:
		return "boot configuration written"
	case DHCPDiscover:
		return "DHCP discover from " + who
	case DHCPOffer:
		return "DHCP offered " + orDash(r.Addr) + withFile(r.File)
	case DHCPAck:
		return "DHCP acknowledged " + orDash(r.Addr)
	case TFTPSent:
		return "TFTP " + r.File + " sent" + size
	case TFTPFailed:
		return "TFTP " + r.File + " failed: " + r.Err
	case Script:
		return "boot script " + r.File + " fetched"
	case Kernel:
		return "kernel downloaded" + size
	case Ramdisk:
		return "ramdisk downloaded" + size
	case File:
		return "HTTP " + r.File + " sent" + size
	case AgentLookup:
		return "agent lookup from " + orDash(r.Addr)
	case AgentHeartbeat:
		return "agent heartbeat from " + orDash(r.Addr)
	case LocalBoot:
		return "told to boot from local disk"
	case Fallback:
		return "unknown machine " + who + " sent to the fallback script"
	}
	return string(r.Stage)
}

func withFile(f string) string {
	if f == "" {
		return ""
	}
	return ", boot file " + f
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Deadlines bound the time between one stage and the next. A zero field
// takes its default; a negative one disables that check.
type Deadlines struct {
	// DHCP is the time from the boot configuration being written to the
	// machine's first DHCP request (power-on and firmware self-test);
	// default 10 minutes.
	DHCP time.Duration
	// Fetch is the time from one boot-server stage to the next (DHCP to
	// boot file, boot file to script, script to kernel, kernel to
	// ramdisk); default 5 minutes.
	Fetch time.Duration
	// Agent is the time from the ramdisk being downloaded to the agent's
	// lookup (the ramdisk's kernel and init starting the agent); default
	// 10 minutes.
	Agent time.Duration
	// Heartbeat is the time from the agent's lookup to its first
	// heartbeat; default 5 minutes.
	Heartbeat time.Duration
}

// Default deadlines: each well under Ironic's 30-minute callback timeout.
const (
	DefaultDHCP      = 10 * time.Minute
	DefaultFetch     = 5 * time.Minute
	DefaultAgent     = 10 * time.Minute
	DefaultHeartbeat = 5 * time.Minute
)

// WithDefaults returns d with zero fields set to the defaults.
func (d Deadlines) WithDefaults() Deadlines {
	def := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	def(&d.DHCP, DefaultDHCP)
	def(&d.Fetch, DefaultFetch)
	def(&d.Agent, DefaultAgent)
	def(&d.Heartbeat, DefaultHeartbeat)
	return d
}

// Current returns the records of the current boot attempt: those from the
// last Prepared on (records must be oldest first). Without a Prepared it
// returns nil: a node whose boot configuration the boot server did not
// write (virtual media, a plugin's own boot) has no network-boot stages.
func Current(records []Record) []Record {
	for i := len(records) - 1; i >= 0; i-- {
		if records[i].Stage == Prepared {
			return records[i:]
		}
	}
	return nil
}

// MaxSummaryRecords bounds the records Summary names: a firmware caught
// in a loop (DHCP again and again) would otherwise make a last_error of
// hundreds of entries.
const MaxSummaryRecords = 12

// Summary joins the records as "phrase at 15:04:05", oldest first, in the
// location of their times. Repeated DHCP exchanges (a firmware retrying,
// or iPXE asking again after the chain load) are kept: they show a loop.
// Beyond MaxSummaryRecords it names the first record (where the attempt
// began), how many were left out, and the newest ones (where it stopped).
func Summary(records []Record) string {
	shown := records
	omitted := 0
	if len(records) > MaxSummaryRecords {
		omitted = len(records) - MaxSummaryRecords
		shown = append([]Record{records[0]}, records[1+omitted:]...)
	}
	parts := make([]string, 0, len(shown)+1)
	for i, r := range shown {
		parts = append(parts, r.Phrase()+" at "+r.At.Format("15:04:05"))
		if i == 0 && omitted > 0 {
			parts = append(parts, fmt.Sprintf("(%d more stages)", omitted))
		}
	}
	return strings.Join(parts, ", ")
}

// Stall is a boot that has not reached its next stage in time.
type Stall struct {
	// Last is the last stage reached.
	Last Record
	// Waiting names what did not come ("DHCP request", "boot file or
	// script request", "agent lookup", "agent heartbeat").
	Waiting string
	// Limit is the deadline that passed.
	Limit time.Duration
	// Message is the full account, for last_error: every stage of the
	// attempt and what is missing.
	Message string
}

// Check reports whether the current boot attempt in records has stalled
// at now under d (zero fields take the defaults). It returns false when
// there is no current attempt, when the agent has heartbeated (the
// conductor's own timeouts apply from there), or when the last stage is
// still within its deadline. A failed TFTP transfer does not stall the
// boot by itself (firmware retries), but its record is in the message.
func Check(records []Record, now time.Time, d Deadlines) (Stall, bool) {
	cur := Current(records)
	if len(cur) == 0 {
		return Stall{}, false
	}
	d = d.WithDefaults()
	last := cur[len(cur)-1]
	var waiting string
	var limit time.Duration
	switch last.Stage {
	case AgentHeartbeat, LocalBoot:
		return Stall{}, false
	case Prepared:
		waiting, limit = "DHCP request", d.DHCP
	case AgentLookup:
		waiting, limit = "agent heartbeat", d.Heartbeat
	case Ramdisk:
		waiting, limit = "agent lookup", d.Agent
	case DHCPDiscover, DHCPOffer, DHCPAck:
		waiting, limit = nextAfterDHCP(cur), d.Fetch
		if last.Arch == "" && reached(cur, Ramdisk) {
			// A client without a PXE architecture after the ramdisk
			// was downloaded: the ramdisk's own OS taking its address
			// (IPA's dhclient), whose agent comes next.
			waiting, limit = "agent lookup", d.Agent
		}
	case TFTPSent, TFTPFailed, File:
		waiting, limit = "boot script or kernel request", d.Fetch
	case Script:
		waiting, limit = "kernel request", d.Fetch
	case Kernel:
		waiting, limit = "ramdisk request", d.Fetch
	default:
		waiting, limit = "next boot stage", d.Fetch
	}
	if limit < 0 {
		return Stall{}, false
	}
	waited := now.Sub(last.At)
	if waited < limit {
		return Stall{}, false
	}
	msg := fmt.Sprintf("%s, no %s in %s", Summary(cur), waiting, secondsText(limit))
	return Stall{Last: last, Waiting: waiting, Limit: limit, Message: msg}, true
}

// reached reports whether the attempt has a record of stage st.
func reached(cur []Record, st Stage) bool {
	for _, r := range cur {
		if r.Stage == st {
			return true
		}
	}
	return false
}

// nextAfterDHCP names what a machine should ask for after its DHCP
// exchange: the iPXE script when it has already loaded iPXE in this
// attempt, otherwise its boot file.
func nextAfterDHCP(cur []Record) string {
	for _, r := range cur {
		if r.Stage == TFTPSent {
			return "iPXE script request"
		}
	}
	return "boot file request"
}

func secondsText(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", int64(d/time.Second))
	}
	return d.String()
}

// Recorder is an Observer that keeps every record in the order it
// arrived: for tests, and for a tool that reads a boot's stages itself.
// It is safe for concurrent use; the zero value is ready.
type Recorder struct {
	mu   sync.Mutex
	recs []Record
}

// ObserveBootStage keeps r.
func (l *Recorder) ObserveBootStage(r Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
}

// Records returns a copy of the records kept so far, oldest first.
func (l *Recorder) Records() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}
