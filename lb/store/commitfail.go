package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrCommit: the store could not write a commit (disk full, I/O error, a
// read-only file system). Nothing of the change was applied; the state
// held before is intact (bbolt rolls the transaction back).
var ErrCommit = errors.New("the state store could not save the change")

// Reason says why a commit could not be written: the label of
// edgelb_store_commit_failures_total.
type Reason string

const (
	ReasonDiskFull Reason = "disk_full"
	ReasonIO       Reason = "io_error"
	ReasonReadOnly Reason = "read_only"
	// ReasonUnavailable: a fleet's shared store without quorum (ErrUnavailable).
	ReasonUnavailable Reason = "unavailable"
	ReasonOther       Reason = "other"
)

var reasonText = map[Reason]string{
	ReasonDiskFull: "disk full: no space left for the state file",
	ReasonIO:       "I/O error writing the state file",
	ReasonReadOnly: "the state file's file system is read-only",
	ReasonOther:    "the state file could not be written",
}

// CommitError is ErrCommit with where and why.
type CommitError struct {
	Path   string
	Reason Reason
	Err    error
}

func (e *CommitError) Error() string {
	return fmt.Sprintf("%s: %s (%v)", reasonText[e.Reason], e.Path, e.Err)
}

func (e *CommitError) Unwrap() []error { return []error{ErrCommit, e.Err} }

// commitError classifies a failed write of the file at path. bbolt passes
// the write's errno through, except when growing the file, where it keeps
// only the text ("file resize error: ..."); then the file system's free
// space tells a full disk from anything else.
func commitError(path string, err error) error {
	var de *DamageError
	if errors.As(err, &de) {
		return err
	}
	r := ReasonOther
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		r = ReasonDiskFull
	case errors.Is(err, syscall.EIO):
		r = ReasonIO
	case errors.Is(err, syscall.EROFS):
		r = ReasonReadOnly
	default:
		var st unix.Statfs_t
		if unix.Statfs(filepath.Dir(path), &st) == nil && st.Bavail == 0 {
			r = ReasonDiskFull
		}
	}
	return &CommitError{Path: path, Reason: r, Err: err}
}

// FailureReason names why a Commit failed, for the metric: a CommitError's
// reason, ReasonUnavailable for a fleet store without quorum, "" for
// ErrStale (another gateway committed first: retried, not a failure).
func FailureReason(err error) Reason {
	var ce *CommitError
	switch {
	case errors.As(err, &ce):
		return ce.Reason
	case errors.Is(err, ErrStale):
		return ""
	case errors.Is(err, ErrUnavailable):
		return ReasonUnavailable
	}
	return ReasonOther
}
