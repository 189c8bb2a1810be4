package webui

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// events is GET /api/v1/events, the live stream: a "snapshot" event, then
// "delta" (flows and aggregates), "pools", "services" and "announce" events
// as things change, and a comment line every KeepAlive so proxies and the
// browser see the connection alive. A reconnect with Last-Event-ID resumes
// when the server still holds everything after that ID, else it starts
// with a fresh snapshot.
func (s *Server) events(c echo.Context) error {
	w, r := c.Response(), c.Request()
	// The first snapshot must be the whole state: wait until Run loaded it.
	select {
	case <-s.primed:
	case <-r.Context().Done():
		return nil
	case <-s.streams:
		return nil
	}
	rc := http.NewResponseController(w)
	// A stream outlives the server-wide read/write timeouts; writes get
	// their own deadline below instead.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("lastEventId")
	}
	cl := s.hub.register(last)
	defer s.hub.unregister(cl)
	// Registered first, so the poll loop cannot drop what this reads.
	s.hub.ensureState(r.Context(), s.opts.Manager, s.opts.Reporters)

	write := func(chunks ...[]byte) error {
		if err := rc.SetWriteDeadline(time.Now().Add(s.opts.StreamWrite)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		for _, b := range chunks {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return rc.Flush()
	}
	// Tell EventSource how soon to reconnect.
	if err := write([]byte("retry: 2000\n\n")); err != nil {
		return nil
	}
	ka := time.NewTicker(s.opts.KeepAlive)
	defer ka.Stop()
	var sent uint64
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.streams:
			return nil
		case <-ka.C:
			if err := write([]byte(": keep-alive\n\n")); err != nil {
				return nil
			}
			continue
		case <-cl.wake:
		}
		q, resync := cl.take()
		var out [][]byte
		if resync {
			f := s.hub.snapshotFrame()
			out = append(out, f.data)
			sent = f.id
		}
		for _, f := range q {
			// Frames already covered by the snapshot just sent are skipped.
			if f.id <= sent {
				continue
			}
			out = append(out, f.data)
			sent = f.id
		}
		if len(out) == 0 {
			continue
		}
		if err := write(out...); err != nil {
			return nil
		}
	}
}
