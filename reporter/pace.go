package reporter

import "time"

// pacer is the reporter's pace (docs/DTA-WIRE.md, "Reporter flow
// control"): a token bucket whose rate starts low with NACKs taken, doubles
// each quiet paceWindow until a NACK, then grows by a quarter; a NACK
// halves it, once per paceWindow. rate 0 is no cap.
type pacer struct {
	limit  float64 // Config.Rate: the highest pace (0: none)
	batch  int     // Config.Batch: the smallest burst
	rate   float64 // the current cap, reports per second; 0 for none
	tokens float64
	// The rate measured over each paceWindow, and the highest.
	lastFill  time.Time
	winStart  time.Time
	winSent   int
	peak      float64
	lastCut   time.Time
	congested bool // a NACK came: the pace grows by a quarter, not double
}

// newPacer returns the pace of a reporter with Config.Rate limit and
// Config.Batch batch, starting at now; slowStart starts it at startPace
// (a reporter that takes NACKs).
func newPacer(limit float64, batch int, slowStart bool, now time.Time) pacer {
	p := pacer{limit: limit, batch: batch, rate: limit, lastFill: now, winStart: now}
	if slowStart && (p.rate == 0 || p.rate > startPace) {
		p.rate = startPace
	}
	p.tokens = p.burst()
	return p
}

// spend counts one report sent, taking a token when paced.
func (p *pacer) spend() {
	if p.rate > 0 {
		p.tokens--
	}
	p.winSent++
}

// burst is the most reports the pace lets go at once.
func (p *pacer) burst() float64 {
	return max(float64(p.batch), p.rate/1000)
}

// wait returns how long until the pace allows one more report: 0 when it
// does now.
func (p *pacer) wait() time.Duration {
	if p.rate > 0 && p.tokens < 1 {
		return time.Duration((1 - p.tokens) / p.rate * float64(time.Second))
	}
	return 0
}

// refill adds the tokens the pace earned since the last call, and at the
// end of each paceWindow measures the rate and raises a pace that no busy
// NACK lowered during it.
func (p *pacer) refill(now time.Time) {
	if p.rate > 0 {
		p.tokens = min(p.tokens+now.Sub(p.lastFill).Seconds()*p.rate, p.burst())
	}
	p.lastFill = now
	el := now.Sub(p.winStart)
	if el < paceWindow {
		return
	}
	p.peak = max(p.peak, float64(p.winSent)/el.Seconds())
	p.winStart, p.winSent = now, 0
	if p.rate == 0 || now.Sub(p.lastCut) < paceWindow {
		return
	}
	if p.congested {
		p.rate *= 1.25
	} else {
		p.rate *= 2
	}
	switch {
	case p.limit > 0:
		p.rate = min(p.rate, p.limit)
	case p.rate >= 2*p.peak:
		p.rate = 0 // back to no cap
	}
}

// slowDown halves the pace for a NACK, once per paceWindow, and reports
// whether it did: the translator refused a report, so it or its collector
// cannot keep up. A reporter without a pace starts from the rate it
// measured.
func (p *pacer) slowDown(now time.Time) bool {
	if now.Sub(p.lastCut) < paceWindow {
		return false
	}
	p.refill(now)
	base := p.rate
	if base == 0 {
		base = p.peak
		if el := now.Sub(p.winStart); el > 0 {
			base = max(base, float64(p.winSent)/el.Seconds())
		}
	}
	p.rate = max(base/2, minPace)
	if p.limit > 0 {
		p.rate = min(p.rate, p.limit)
	}
	p.tokens = max(0, min(p.tokens, p.burst()))
	p.lastCut, p.congested = now, true
	return true
}

// limited reports whether the pace allows no report now.
func (p *pacer) limited() bool { return p.rate > 0 && p.tokens < 1 }
