package pivot

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// State is what a pivot run has to remember across an interruption,
// written to <dir>/state.json before the step that needs it mutates
// anything.
type State struct {
	// Clusters and ClusterClasses are those in the management namespace on
	// kind that were not paused when krops first looked: clusterctl pauses
	// them during the backup and the move, so after an interruption these,
	// and only these, are krops's to unpause. A Cluster paused by Git or a
	// person is never in them.
	Clusters       []string `json:"clusters,omitempty"`
	ClusterClasses []string `json:"clusterClasses,omitempty"`
	// MoveStarted: the move may have created objects on the target and
	// deleted some on kind; a rerun resumes it instead of waiting for the
	// management Cluster on kind again.
	MoveStarted bool `json:"moveStarted,omitempty"`
	// Moved: the move finished; kind holds nothing more to move.
	Moved bool `json:"moved,omitempty"`
}

// LoadState reads the state a pivot run saved in dir (empty when none).
func LoadState(dir string) (State, error) {
	var s State
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("pivot state %s is unreadable (%v): move it aside only if kind still holds every Cluster", filepath.Join(dir, "state.json"), err)
	}
	return s, nil
}

// save writes the state atomically: a crash leaves the old or the new one.
func (s State) save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "state.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "state.json"))
}
