package statesync

import (
	"bufio"
	"strconv"
	"strings"
)

// ParseStats reads the output of `conntrackd -s` (conntrack-tools 1.4.x):
//
//	cache internal:
//	current active connections:	           3
//	...
//	cache external:
//	current active connections:	          97
//	...
//	UDP traffic (active device=eth1):
//	                 840 Bytes sent                  9712 Bytes recv
//	                  12 Pckts sent                    31 Pckts recv
//	                   0 Error send                     0 Error recv
//	message tracking:
//	                   0 Malformed msgs                    0 Lost msgs
//
// Lines it does not know are skipped, so a newer conntrackd's extra
// sections do not break it; a counter it cannot find stays 0.
func ParseStats(out string) Stats {
	var s Stats
	section := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			continue
		case strings.HasSuffix(line, ":") || strings.Contains(line, "traffic (active device="):
			section = line
			continue
		}
		if strings.HasPrefix(line, "current active connections:") {
			n := num(strings.TrimPrefix(line, "current active connections:"))
			switch section {
			case "cache internal:":
				s.Internal = n
			case "cache external:":
				s.External = n
			}
			continue
		}
		// "N word word   M word word": two counters on one line.
		f := strings.Fields(line)
		if len(f) != 6 {
			continue
		}
		a, b := num(f[0]), num(f[3])
		switch {
		case f[1] == "Pckts" && f[2] == "sent" && f[5] == "recv":
			s.SentPackets, s.RecvPackets = a, b
		case f[1] == "Error" && f[2] == "send" && f[5] == "recv":
			s.SendErrors, s.RecvErrors = a, b
		case f[4] == "Lost" && f[5] == "msgs":
			s.Lost = b
		}
	}
	return s
}

// ParseQueue reads `conntrackd -s queue` (1.4.x) into s: the FTFW resend
// queue (rsqueue) holds the messages sent and not yet acknowledged by the
// peer, the transmit queue (txqueue) those not yet sent, and "not enough
// space errors" of rsqueue count messages dropped because the resend queue
// was full (a peer that would have needed them must resynchronise):
//
//	queue txqueue:
//	current elements:		           0
//	...
//	queue rsqueue:
//	current elements:		          50
//	maximum elements:		      131072
//	not enough space errors:	           0
func ParseQueue(out string, s *Stats) {
	queue := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if name, ok := strings.CutPrefix(line, "queue "); ok {
			queue = strings.TrimSuffix(name, ":")
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case queue == "rsqueue" && key == "current elements":
			s.Unacked = num(val)
		case queue == "rsqueue" && key == "not enough space errors":
			s.ResendDropped = num(val)
		case queue == "txqueue" && key == "current elements":
			s.Unsent = num(val)
		}
	}
}

func num(s string) uint64 {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
