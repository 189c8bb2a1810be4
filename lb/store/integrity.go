package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime/debug"
)

// Typed errors of a store that cannot be trusted. The daemon maps each to
// its own exit code (cmd/edgelb/README.md), so a restart-on-failure unit
// stops instead of looping on it.
var (
	// ErrDamaged: the file or a record fails its integrity checks (bbolt's
	// own, or a record's checksum), or bbolt faulted reading it.
	ErrDamaged = errors.New("store damaged")
	// ErrVersion: the file was written by an edgelb with a newer layout.
	ErrVersion = errors.New("store written by a newer edgelb")
	// ErrConflict: two stored services hold one address without sharing it.
	ErrConflict = errors.New("stored assignments conflict")
)

// WayOut is what to do about a store that cannot be trusted; every error
// above ends with it.
const WayOut = `edgelb will not start on it: a store it cannot trust could give one address to two services. ` +
	`Restore the file from a backup; or, to start over deliberately, move it aside and run "edgelb cleanup" ` +
	`(removes edgelb's kernel state) before starting edgelb again`

// DamageError says which file, and where in it, failed and how.
type DamageError struct {
	Path   string
	Where  string // "" (the file), or bucket/"key"
	Detail string
	Kind   error // ErrDamaged or ErrVersion
}

func (e *DamageError) Error() string {
	where := ""
	if e.Where != "" {
		where = " (record " + e.Where + ")"
	}
	return fmt.Sprintf("store %s is damaged%s: %s. %s", e.Path, where, e.Detail, WayOut)
}

func (e *DamageError) Is(target error) bool { return target == e.Kind }

// Records are framed with a checksum: magic byte 0xED, format 1, then the
// CRC-32C of the key, a zero byte and the JSON, then the JSON. The key is
// covered, so a record copied under another name is caught as well as a
// flipped byte. Records written before checksums start with '{'; OpenBolt
// frames them when it migrates such a file (migrateLegacy).
const (
	frameMagic   = 0xED
	frameVersion = 1
	frameHeader  = 6
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func recordSum(key string, body []byte) uint32 {
	h := crc32.New(castagnoli)
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum32()
}

func frame(key string, body []byte) []byte {
	rec := append(make([]byte, frameHeader, frameHeader+len(body)), body...)
	rec[0], rec[1] = frameMagic, frameVersion
	binary.BigEndian.PutUint32(rec[2:], recordSum(key, rec[frameHeader:]))
	return rec
}

// unframe checks a record's checksum and returns its JSON. (Records from
// before checksums exist only in a schema-1 file, which OpenBolt migrates;
// an unframed record in a migrated file was written outside edgelb.)
func unframe(key string, data []byte) ([]byte, error) {
	switch {
	case len(data) > 0 && data[0] == '{':
		return nil, errors.New("record without a checksum: written outside edgelb")
	case len(data) < frameHeader || data[0] != frameMagic:
		return nil, errors.New("not an edgelb record")
	case data[1] != frameVersion:
		return nil, fmt.Errorf("record format %d, this edgelb reads %d", data[1], frameVersion)
	}
	body := data[frameHeader:]
	if want, got := binary.BigEndian.Uint32(data[2:]), recordSum(key, body); want != got {
		return nil, fmt.Errorf("checksum mismatch (stored %08x, computed %08x): the record was changed outside edgelb", want, got)
	}
	return body, nil
}

// guard runs fn, turning a panic — bbolt panics on pages it cannot make
// sense of — or a memory fault (a truncated file is mapped past its end:
// SIGBUS) into a DamageError, so the daemon exits with a clear message
// instead of a stack trace a restart-on-failure unit would loop on.
func guard(path string, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = &DamageError{Path: path, Detail: fmt.Sprintf("bbolt cannot read it (%v)", r), Kind: ErrDamaged}
		}
	}()
	return fn()
}

// FrameForTest frames body as edgelb would store it under key: for tests
// that must write a record edgelb would accept (checksum and all).
func FrameForTest(key string, body []byte) []byte { return frame(key, body) }
