package chaos

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"
)

// leaderWatch polls the drover_leader row, so the harness knows whom to kill and
// can check, from the database's own record, that no two leases ever overlapped.
type leaderWatch struct {
	mu     sync.Mutex
	terms  []leaderTerm // one per distinct election seen
	cancel context.CancelFunc
	done   chan struct{}
	notify chan struct{}
	query  string
	h      *harness
}

// leaderTerm is one leader's lease as polled: elected at, last expiry seen.
type leaderTerm struct {
	ID               string
	Elected, Expires time.Time
}

func (w *leaderWatch) start(h *harness) {
	w.h = h
	w.notify = make(chan struct{})
	w.query = `SELECT leader_id, (extract(epoch from elected_at)*1000000)::bigint, (extract(epoch from expires_at)*1000000)::bigint
FROM drover_leader WHERE name = 'default'`
	if h.pg == nil {
		w.query = `SELECT leader_id, elected_at, expires_at FROM drover_leader WHERE name = 'default'`
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan struct{})
	go func() {
		defer close(w.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			w.poll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

func (w *leaderWatch) poll(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var id string
	var el, ex int64
	if err := w.h.sqlDB.QueryRowContext(qctx, w.query).Scan(&id, &el, &ex); err != nil {
		return // no leader, or the database is down
	}
	term := leaderTerm{ID: id, Elected: time.UnixMicro(el), Expires: time.UnixMicro(ex)}
	w.mu.Lock()
	if n := len(w.terms); n > 0 && w.terms[n-1].ID == id && w.terms[n-1].Elected.Equal(term.Elected) {
		w.terms[n-1].Expires = term.Expires
	} else {
		w.terms = append(w.terms, term)
	}
	close(w.notify)
	w.notify = make(chan struct{})
	w.mu.Unlock()
}

func (w *leaderWatch) stop() {
	if w.cancel != nil {
		w.cancel()
		<-w.done
	}
}

// current returns the leader whose lease has not expired, or "".
func (w *leaderWatch) current() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.terms); n > 0 && time.Now().Before(w.terms[n-1].Expires) {
		return w.terms[n-1].ID
	}
	return ""
}

// await waits for a leader other than not, with an unexpired lease.
func (w *leaderWatch) await(ctx context.Context, not string, timeout time.Duration) (string, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		next := w.notify
		w.mu.Unlock()
		if id := w.current(); id != "" && id != not {
			return id, true
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-deadline.C:
			return "", false
		case <-next:
		}
	}
}

// leaderCheck counts overlapping leaderships two ways: in the database (a term
// elected before the previous one's lease expired) and as the processes saw it
// (a process announcing leadership while another's term, bounded by its lease,
// its "leader false" line or its SIGKILL, was still open).
func (h *harness) leaderCheck() (overlaps, changes int, examples []string) {
	h.leaders.mu.Lock()
	terms := append([]leaderTerm(nil), h.leaders.terms...)
	h.leaders.mu.Unlock()
	for i := 1; i < len(terms); i++ {
		prev, cur := terms[i-1], terms[i]
		if cur.ID != prev.ID {
			changes++
		}
		if cur.Elected.Before(prev.Expires) {
			overlaps++
			examples = append(examples, fmt.Sprintf("database: %s elected at %s while %s held the lease until %s",
				cur.ID, cur.Elected.Format(time.StampMilli), prev.ID, prev.Expires.Format(time.StampMilli)))
		}
	}

	type span struct {
		id         string
		start, end time.Time
	}
	var spans []*span
	open := map[string]*span{}
	lines, _ := h.lines.since(0)
	for _, l := range lines {
		if len(l.Fields) != 4 || l.Fields[0] != "leader" {
			continue
		}
		ns, err := strconv.ParseInt(l.Fields[3], 10, 64)
		if err != nil {
			continue
		}
		at := time.Unix(0, ns)
		if l.Fields[1] == "true" {
			s := &span{id: l.Proc, start: at}
			spans = append(spans, s)
			open[l.Proc] = s
		} else if s := open[l.Proc]; s != nil {
			s.end = at
			delete(open, l.Proc)
		}
	}
	h.mu.Lock()
	for _, s := range spans {
		if k, ok := h.killedAt[s.id]; ok && !k.Before(s.start) && (s.end.IsZero() || k.Before(s.end)) {
			s.end = k
		}
		// A process acts only while its lease lasts (the engine checks before
		// every pass), so its term ends at the last expiry the database showed.
		var lastExp time.Time
		for _, t := range terms {
			if t.ID == s.id && !t.Elected.After(s.start) && !t.Expires.Before(s.start) {
				lastExp = t.Expires
			}
		}
		if !lastExp.IsZero() && (s.end.IsZero() || lastExp.Before(s.end)) {
			s.end = lastExp
		}
	}
	h.mu.Unlock()
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if b.id != a.id && (a.end.IsZero() || b.start.Before(a.end)) {
				overlaps++
				examples = append(examples, fmt.Sprintf("processes: %s announced leadership at %s while %s led until %s",
					b.id, b.start.Format(time.StampMilli), a.id, a.end.Format(time.StampMilli)))
			}
		}
	}
	return overlaps, changes, examples
}
