// Command go-worker is a converge worker in Go: the `gonote` kind writes each resource's text
// to a file.
//
//	go-worker manifest     # prints the kind's manifest, generated from the types below
//	go-worker              # serves the kind (BROKER_ADDR, WORKER_NAME, ..., LOG_LEVEL)
//
// A `gonote` resource's spec says what to write (`text`, `copies`); the worker writes
// `<directory>/<name>.txt`, where the directory comes from the kind's provider config
// (NoteConfig) or, without one, $NOTES_DIR (default /tmp/converge-notes). Its status says
// where, how many bytes and the file's SHA-256. Deleting the resource runs the `teardown`
// reaction, which removes the file before the resource goes (the manifest's finalizer).
//
// The manifest's spec, status and config schemas are generated from NoteSpec, NoteStatus and
// NoteConfig (converge.ManifestOf, converge.SchemaOf), the same types the handler decodes and
// builds with: converge refuses a spec these types would refuse, at apply.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	converge "converge.dev/sdk-go"
)

var kind = converge.KindVersion{Kind: "gonote", Version: 1}

const finalizer = "examples.converge.dev/gonote-file"

// NoteSpec is what a note says. Fields without omitempty are required; a key it has no
// field for is refused at apply.
type NoteSpec struct {
	Text   string `json:"text" jsonschema:"description=The note's text; written once per copy."`
	Copies int    `json:"copies,omitempty" jsonschema:"minimum=1,maximum=100,default=1"`
}

// NoteStatus is what the worker reports.
type NoteStatus struct {
	Path               string `json:"path"`
	Bytes              int    `json:"bytes"`
	SHA256             string `json:"sha256"`
	ObservedGeneration int64  `json:"observed_generation"`
}

// NoteConfig is the kind's provider config: where notes are written.
type NoteConfig struct {
	Directory string `json:"directory" jsonschema:"description=An absolute directory; created if missing."`
}

// manifest is the kind's manifest, its schemas from the types above.
func manifest() *converge.KindManifest {
	m := converge.ManifestOf[NoteSpec, NoteStatus](kind, converge.WorkReaction(), converge.TeardownReaction())
	m.Description = "A note written to a file by the Go example worker (examples/go-worker)."
	m.ConfigSchema = converge.SchemaOf[NoteConfig]()
	m.FinalizerName = finalizer
	m.TaskDeadlineSecs = 30
	return m
}

type note struct{ log *slog.Logger }

func (note) Kind() converge.KindVersion { return kind }

func notesDir(req *converge.ReactionRequest) (string, error) {
	raw, err := req.EffectiveConfig()
	if err != nil {
		return "", err
	}
	var cfg NoteConfig
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return "", converge.Terminalf("invalid provider config: %v", err)
		}
	}
	if cfg.Directory != "" {
		return cfg.Directory, nil
	}
	if d := os.Getenv("NOTES_DIR"); d != "" {
		return d, nil
	}
	return "/tmp/converge-notes", nil
}

func (n note) Work(ctx context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
	dir, err := notesDir(req)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(dir) {
		return nil, converge.Terminalf("the notes directory %q is not absolute", dir)
	}
	path := filepath.Join(dir, req.Resource.Name+".txt")
	if req.Stage == converge.StageDelete {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err // transient: retried with backoff
		}
		n.log.Info("removed", "path", path)
		return &converge.Outcome{}, nil
	}
	var spec NoteSpec
	if err := req.Spec(&spec); err != nil {
		return nil, err
	}
	if spec.Copies == 0 {
		spec.Copies = 1
	}
	body := []byte(strings.Repeat(spec.Text+"\n", spec.Copies))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return nil, err
	}
	n.log.Info("wrote", "path", path, "bytes", len(body), "generation", req.Generation)
	sum := sha256.Sum256(body)
	status := NoteStatus{Path: path, Bytes: len(body), SHA256: hex.EncodeToString(sum[:]),
		ObservedGeneration: req.Generation}
	return converge.StatusOutcome(status).
		WithCondition(converge.ReadyCondition(true, "Written", fmt.Sprintf("%d line(s) in %s", spec.Copies, path))), nil
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	switch {
	case len(os.Args) == 2 && os.Args[1] == "manifest":
		out, err := json.MarshalIndent(manifest(), "", "  ")
		if err != nil {
			log.Error("manifest", "err", err)
			os.Exit(1)
		}
		fmt.Println(string(out))
	case len(os.Args) > 1:
		fmt.Fprintf(os.Stderr, "usage: %s [manifest]\n", os.Args[0])
		os.Exit(2)
	default:
		log.Info("serving", "kind", kind.String(), "broker", os.Getenv("BROKER_ADDR"))
		// Reads the environment, drains on SIGTERM/SIGINT, returns nil after a clean drain.
		if err := converge.RunWorker([]converge.Provider{note{log: log}}); err != nil {
			log.Error("worker", "err", err)
			os.Exit(1)
		}
	}
}
