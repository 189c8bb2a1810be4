package l2resp

import "time"

// readLoop hands every received frame to the protocol until Close. A read
// error (interface deleted and recreated, driver reset) reopens the link
// after a pause instead of giving up: the announcer keeps its ownership and
// the answers resume.
func (c *Core[L, F]) readLoop() {
	defer c.wg.Done()
	buf := make([]byte, c.cfg.ReadBuffer)
	for {
		c.mu.Lock()
		link, up := c.link, c.up
		c.mu.Unlock()
		if !up {
			if !c.reopen() {
				return
			}
			continue
		}
		n, _, err := link.ReadFrom(buf)
		if err != nil {
			select {
			case <-c.done:
				return
			default:
			}
			c.log.Warn(c.cfg.ReadFailed, "err", err)
			c.mu.Lock()
			c.closeLinkLocked() // the read error is the news; a close error adds nothing
			c.mu.Unlock()
			continue
		}
		c.receive(buf[:n])
	}
}

func (c *Core[L, F]) receive(b []byte) {
	f, err := c.p.Parse(b)
	if err != nil {
		return // not ours to judge: malformed or foreign frames are dropped
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.p.Handle(c.stateLocked(), f)
}

// reopen retries opening the link every Retry until it works or Close.
func (c *Core[L, F]) reopen() bool {
	for {
		select {
		case <-c.done:
			return false
		case <-time.After(c.cfg.Retry):
		}
		link, mac, err := c.p.Open(c.cfg.Interface)
		if err != nil {
			c.log.Warn(c.cfg.ReopenFailed, "err", err)
			continue
		}
		c.mu.Lock()
		select {
		case <-c.done:
			c.mu.Unlock()
			link.Close()
			return false
		default:
		}
		c.link, c.mac, c.up = link, mac, true
		c.count.Reopens++
		s := c.stateLocked()
		c.p.Reopened(s)
		// Neighbours may have missed us while the link was down: announce again.
		for a := range c.owned {
			c.p.Announce(s, a)
		}
		c.mu.Unlock()
		return true
	}
}
