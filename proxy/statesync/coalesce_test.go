package statesync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// fakeProcCtl writes what the gate does into a transcript. Its processes
// run rate[pid] rounds in every interval the gate sleeps (a stopped one
// too: the events wait for it), and busy answers true while busyLeft[pid]
// is above 0.
type fakeProcCtl struct {
	clock    time.Time // advanced by fakeSleep; the gate's now
	log      []string
	rate     map[int]uint64
	rounds_  map[int]uint64
	busyLeft map[int]int
}

func (f *fakeProcCtl) stop(p *os.Process) error {
	f.log = append(f.log, fmt.Sprintf("stop %d", p.Pid))
	return nil
}

func (f *fakeProcCtl) cont(p *os.Process) error {
	f.log = append(f.log, fmt.Sprintf("cont %d", p.Pid))
	return nil
}

func (f *fakeProcCtl) busy(p *os.Process) bool {
	if f.busyLeft[p.Pid] > 0 {
		f.busyLeft[p.Pid]--
		return true
	}
	return false
}

func (f *fakeProcCtl) rounds(p *os.Process) uint64 { return f.rounds_[p.Pid] }
func (f *fakeProcCtl) track(p *os.Process)         {}
func (f *fakeProcCtl) forget(p *os.Process)        { f.log = append(f.log, fmt.Sprintf("forget %d", p.Pid)) }

// fakeSleep logs each sleep, advances the rounds by an interval's rate for
// every interval slept,
// and runs hook (if any) before the n-th one returns; after max sleeps it
// ends the run ("end").
func fakeSleep(f *fakeProcCtl, every time.Duration, max int, hooks map[int]func()) func(context.Context, time.Duration) error {
	n := 0
	return func(_ context.Context, d time.Duration) error {
		n++
		if n > max {
			f.log = append(f.log, "end")
			return errors.New("done")
		}
		f.log = append(f.log, "sleep "+d.String())
		f.clock = f.clock.Add(d)
		if d >= every {
			for pid, r := range f.rate {
				f.rounds_[pid] += r * uint64(d/every)
			}
		}
		if h := hooks[n]; h != nil {
			h()
		}
		return nil
	}
}

func TestGateCycles(t *testing.T) {
	p1, p2 := &os.Process{Pid: 1}, &os.Process{Pid: 2}
	busy := map[int]uint64{1: 10} // 10 rounds in 50 ms: 100/s per process, above gateRoundsPerSec
	cases := []struct {
		name  string
		every time.Duration
		rate  map[int]uint64
		start map[int]uint64 // rounds before the run
		gated bool           // start batching (as after a busy interval)
		busy  map[int]int
		max   int
		hooks func(g *gate) map[int]func()
		want  string
	}{{
		name: "idle processes are never stopped, only counted once a second",
		rate: map[int]uint64{1: 1, 2: 1}, // 40 rounds/s together
		max:  3,
		want: "sleep 1s, sleep 1s, sleep 1s, end",
	}, {
		name: "the mesh's links read the same events: counted per process",
		rate: map[int]uint64{1: 2, 2: 2}, // 80 rounds/s together, 40 each
		max:  3,
		want: "sleep 1s, sleep 1s, sleep 1s, end",
	}, {
		name: "a process added while counting is no burst (its past rounds are not this interval's)",
		rate: map[int]uint64{1: 1},
		max:  3,
		hooks: func(g *gate) map[int]func() {
			return map[int]func(){1: func() {
				g.ctl.(*fakeProcCtl).rounds_[3] = 1_000_000
				g.add(&os.Process{Pid: 3})
			}}
		},
		want: "sleep 1s, sleep 1s, sleep 1s, end",
	}, {
		name:  "a process gone reads 0 rounds: the sum falls, no wrap-around burst",
		start: map[int]uint64{1: 1000},
		max:   3,
		hooks: func(g *gate) map[int]func() {
			return map[int]func(){1: func() { g.ctl.(*fakeProcCtl).rounds_[1] = 0 }}
		},
		want: "sleep 1s, sleep 1s, sleep 1s, end",
	}, {
		name: "busy: gated from the first count (a second), stopped an interval, continued, stopped again once idle",
		rate: busy,
		max:  5,
		want: "sleep 1s, stop 1, stop 2, sleep 50ms, cont 1, cont 2, sleep 1ms, stop 1, stop 2, sleep 50ms, cont 1, cont 2, sleep 1ms, stop 1, stop 2, end, cont 1, cont 2",
	}, {
		name:  "a process busy at the tick is left running that interval",
		rate:  busy,
		gated: true,
		busy:  map[int]int{2: 2},
		max:   3,
		want:  "sleep 50ms, sleep 50ms, stop 1, stop 2, sleep 50ms, cont 1, cont 2, end",
	}, {
		name:  "after an interval stopped, the gate waits while one drains its queue, then stops both",
		rate:  busy,
		gated: true,
		max:   5,
		hooks: func(g *gate) map[int]func() {
			return map[int]func(){1: func() { g.ctl.(*fakeProcCtl).busyLeft = map[int]int{2: 2} }}
		},
		want: "stop 1, stop 2, sleep 50ms, cont 1, cont 2, sleep 1ms, sleep 1ms, sleep 1ms, stop 1, stop 2, sleep 50ms, cont 1, cont 2, end",
	}, {
		name:  "busy beyond the longest drain: not stopped again while busy",
		rate:  busy,
		gated: true,
		max:   int(gateMaxDrain/gateIdlePoll) + 2,
		hooks: func(g *gate) map[int]func() {
			return map[int]func(){1: func() { g.ctl.(*fakeProcCtl).busyLeft = map[int]int{1: 1000} }}
		},
		want: "stop 1, stop 2, sleep 50ms, cont 1, cont 2, " + strings.Repeat("sleep 1ms, ", int(gateMaxDrain/gateIdlePoll)) + "sleep 50ms, end",
	}, {
		name:  "a hold continues them at once and keeps them running; gateAfterHold after the release, they stop again",
		every: time.Second,
		rate:  map[int]uint64{1: 200}, // 100/s per process
		gated: true,
		max:   10,
		hooks: func(g *gate) map[int]func() {
			var release func()
			return map[int]func(){
				1: func() { release = g.hold(gateAfterHold) }, // while stopped
				3: func() { release() },
			}
		},
		// Released at 3 s: running until 8 s (gateAfterHold), then stopped.
		want: "stop 1, stop 2, sleep 1s, cont 1, cont 2, " + strings.Repeat("sleep 1s, ", 7) +
			"stop 1, stop 2, sleep 1s, cont 1, cont 2, sleep 1ms, stop 1, stop 2, end, cont 1, cont 2",
	}, {
		name:  "a command's hold (after 0, status reads): released, they stop again at the next tick",
		rate:  busy,
		gated: true,
		max:   6,
		hooks: func(g *gate) map[int]func() {
			var release func()
			return map[int]func(){
				1: func() { release = g.hold(0) }, // while stopped
				3: func() { release() },
			}
		},
		want: "stop 1, stop 2, sleep 50ms, cont 1, cont 2, sleep 50ms, sleep 50ms, stop 1, stop 2, sleep 50ms, cont 1, cont 2, sleep 1ms, stop 1, stop 2, sleep 50ms, cont 1, cont 2, end",
	}, {
		name:  "a removed process is continued (its SIGTERM must not stay pending) and no longer signalled",
		rate:  busy,
		gated: true,
		max:   3,
		hooks: func(g *gate) map[int]func() {
			return map[int]func(){1: func() { g.remove(p2) }}
		},
		want: "stop 1, stop 2, sleep 50ms, cont 2, forget 2, cont 1, sleep 1ms, stop 1, sleep 50ms, cont 1, end",
	}, {
		name:  "every gateProbe one interval ungated; quiet by then, the gate stays open",
		every: time.Second,
		rate:  map[int]uint64{1: 10}, // 10 a second: quiet
		gated: true,
		max:   12,
		want: strings.Repeat("stop 1, stop 2, sleep 1s, cont 1, cont 2, sleep 1ms, ", 4) +
			"sleep 1s, sleep 1s, sleep 1s, sleep 1s, end",
	}, {
		name:  "a quiet probe goes back to counting once a second",
		every: 100 * time.Millisecond,
		rate:  map[int]uint64{1: 2}, // 10/s per process
		gated: true,
		max:   int(gateProbe/(100*time.Millisecond))*2 + 1,
		want: strings.Repeat("stop 1, stop 2, sleep 100ms, cont 1, cont 2, sleep 1ms, ", int(gateProbe/(100*time.Millisecond))-1) +
			"sleep 100ms, sleep 1s, sleep 1s, end",
	}, {
		name:  "every gateProbe one interval ungated; still busy, gated again",
		every: time.Second,
		rate:  map[int]uint64{1: 200}, // 100/s per process
		gated: true,
		max:   12,
		want: strings.Repeat("stop 1, stop 2, sleep 1s, cont 1, cont 2, sleep 1ms, ", 4) +
			"sleep 1s, stop 1, stop 2, sleep 1s, cont 1, cont 2, sleep 1ms, stop 1, stop 2, sleep 1s, cont 1, cont 2, end",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			every := cmp.Or(c.every, 50*time.Millisecond)
			f := &fakeProcCtl{rate: c.rate, rounds_: map[int]uint64{}, busyLeft: c.busy}
			for pid, r := range c.start {
				f.rounds_[pid] = r
			}
			g := newGate(every, f)
			g.now = func() time.Time { return f.clock }
			g.add(p1)
			g.add(p2)
			g.gated = c.gated
			var hooks map[int]func()
			if c.hooks != nil {
				hooks = c.hooks(g)
			}
			// run's exit (the transcript's "end") continues what it left stopped.
			g.run(context.Background(), fakeSleep(f, every, c.max, hooks))
			if got := strings.Join(f.log, ", "); got != c.want {
				t.Fatalf("transcript\n got: %s\nwant: %s", got, c.want)
			}
		})
	}
}

func TestGateHoldWhileRunningSendsNothing(t *testing.T) {
	f := &fakeProcCtl{}
	g := newGate(time.Second, f)
	g.add(&os.Process{Pid: 7})
	release := g.hold(0)
	release()
	release() // twice is once
	if len(f.log) != 0 || g.holds != 0 {
		t.Fatalf("a hold of running processes signalled %v, holds %d", f.log, g.holds)
	}
}

func TestSchedstatRounds(t *testing.T) {
	for in, want := range map[string]uint64{
		"1234567 89012 345\n": 345,
		"1 2":                 0,
		"":                    0,
		"1 2 x":               0,
	} {
		if got := schedstatRounds([]byte(in)); got != want {
			t.Errorf("schedstatRounds(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestNilGateIsOff(t *testing.T) {
	var g *gate // Options.Coalesce 0
	p := &os.Process{Pid: 7}
	g.add(p)
	g.hold(gateAfterHold)()
	g.remove(p)
}

func TestProcStateRunning(t *testing.T) {
	for stat, want := range map[string]bool{
		"123 (conntrackd) R 1 2 3":   true,
		"123 (conntrackd) S 1 2 3":   false,
		"123 (conntrackd) T 1 2 3":   false,
		"123 (a) b) R 1":             true, // the name may hold ')'
		"123 (a R) S 1":              false,
		"123 (conntrackd)":           false,
		"":                           false,
		"123 (conntrackd) D 1 2 3 4": false,
	} {
		if got := procStateRunning([]byte(stat)); got != want {
			t.Errorf("procStateRunning(%q) = %v, want %v", stat, got, want)
		}
	}
}
