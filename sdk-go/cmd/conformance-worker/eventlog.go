package main

import (
	"encoding/json"
	"os"
	"sync"

	converge "converge.dev/sdk-go"
)

// eventLog appends one JSON line per handler event. Each line is written with a single
// write call on an O_APPEND file, so lines from concurrent handlers (and from other
// worker processes sharing the file) never interleave.
type eventLog struct {
	form string
	mu   sync.Mutex
	f    *os.File // nil: logging disabled
}

type event struct {
	Form       string `json:"form"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Reaction   string `json:"reaction"`
	Stage      string `json:"stage"`
	Generation int64  `json:"generation"`
	Attempt    int32  `json:"attempt"`
	Event      string `json:"event"`
	// Reason is the cancellation's reason (`cancelled` events only).
	Reason *string `json:"reason,omitempty"`
	// Transition and DedupToken are the delivery's (`react` events only).
	Transition *string `json:"transition,omitempty"`
	DedupToken *string `json:"dedup_token,omitempty"`
}

func openEventLog(path, form string) (*eventLog, error) {
	l := &eventLog{form: form}
	if path == "" {
		return l, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	l.f = f
	return l, nil
}

func (l *eventLog) record(req *converge.ReactionRequest, what string) {
	l.write(l.line(req, what))
}

// line is the event for req without the optional keys.
func (l *eventLog) line(req *converge.ReactionRequest, what string) event {
	return event{
		Form:       l.form,
		Kind:       req.Kind,
		Name:       req.Resource.Name,
		Reaction:   req.Reaction,
		Stage:      req.Stage.String(),
		Generation: req.Generation,
		Attempt:    req.Attempt,
		Event:      what,
	}
}

// write appends ev as one line.
func (l *eventLog) write(ev event) {
	if l.f == nil {
		return
	}
	line, err := json.Marshal(ev)
	if err != nil {
		return
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	// os.File is unbuffered, so the line is in the file once Write returns. Best effort:
	// a lost event fails the scenario that needs it, loudly enough.
	_, _ = l.f.Write(line)
}

func (l *eventLog) close() {
	if l.f != nil {
		_ = l.f.Close()
	}
}

// stageEvent is the event name logged when a handler starts.
func stageEvent(s converge.Stage) string {
	switch s {
	case converge.StageCompose:
		return "compose"
	case converge.StageRollup:
		return "rollup"
	case converge.StageDelete:
		return "delete"
	case converge.StageOperate:
		return "operate"
	case converge.StageReact:
		return "react"
	default:
		return "work"
	}
}
