package daemon

import (
	"fmt"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// notifier speaks systemd's notify protocol (Type=notify): READY=1 once the
// dataplane is programmed and the API listens, STATUS= lines, STOPPING=1, and
// WATCHDOG=1 from the reconcile loop so a wedged writer gets the unit restarted.
// Without NOTIFY_SOCKET every call is a no-op.
type notifier struct {
	// interval between watchdog pings (half of WatchdogSec), 0 when disabled.
	interval time.Duration
	last     time.Time
}

func newNotifier() (*notifier, error) {
	d, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		return nil, fmt.Errorf("systemd watchdog settings: %w", err)
	}
	return &notifier{interval: d / 2}, nil
}

func (n *notifier) send(state string) {
	// An error means systemd went away; nothing useful to do about it here.
	_, _ = sd.SdNotify(false, state)
}

func (n *notifier) Ready(status string) { n.send(sd.SdNotifyReady + "\nSTATUS=" + status) }
func (n *notifier) Status(s string)     { n.send("STATUS=" + s) }
func (n *notifier) Stopping()           { n.send(sd.SdNotifyStopping) }
func (n *notifier) Reloading()          { n.send(sd.SdNotifyReloading) }

// Alive pings the watchdog, at most once per interval.
func (n *notifier) Alive(now time.Time) {
	if n.interval == 0 || now.Sub(n.last) < n.interval {
		return
	}
	n.last = now
	n.send(sd.SdNotifyWatchdog)
}
