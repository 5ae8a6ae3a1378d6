package main

import (
	"fmt"
	"sort"
)

// burnDownSchedule is the order of the burn-down runs with rounds > 1: every
// system once in its usual order, then rounds-1 times again, each round in the
// reverse order of the one before, so that no system always runs first or
// right after the same system, and a slow spell of the machine falls on each
// one's rounds alike. The raw baselines run in rounds too: a share of raw is a
// median over a median, not a median over one run that a fast or a slow minute
// of the machine decided.
func burnDownSchedule(systems []system, rounds int) []system {
	out := append([]system(nil), systems...)
	for r := 1; r < rounds; r++ {
		for i := range systems {
			if r%2 == 1 {
				out = append(out, systems[len(systems)-1-i])
			} else {
				out = append(out, systems[i])
			}
		}
	}
	return out
}

// mergeRounds folds the results of one workload's runs into one result per
// system, in the order each system first appears. A system that ran more than
// once reports the median of its work rates and, separately, of its insert
// rates (the lower middle for an even count); lost and duplicated jobs are
// summed over every round, and any round's error is kept. The work rate of
// every round is kept too (WorkRounds), in the order they ran.
func mergeRounds(results []result) []result {
	var order []string
	by := map[string][]result{}
	for _, r := range results {
		if _, ok := by[r.System]; !ok {
			order = append(order, r.System)
		}
		by[r.System] = append(by[r.System], r)
	}
	out := make([]result, 0, len(order))
	for _, name := range order {
		rs := by[name]
		if len(rs) == 1 {
			out = append(out, rs[0])
			continue
		}
		// The median is of the rounds that succeeded: a failed round's rate is
		// partial. It shows as 0 among the rounds, and its error is kept.
		work := make([]float64, len(rs))
		var ok []result
		for i, r := range rs {
			if r.Error == "" {
				work[i] = r.WorkPerSec
				ok = append(ok, r)
			}
		}
		if len(ok) == 0 {
			ok = rs
		}
		m := ok[medianIndex(ok, func(r result) float64 { return r.WorkPerSec })]
		m.InsertPerSec = ok[medianIndex(ok, func(r result) float64 { return r.InsertPerSec })].InsertPerSec
		m.WorkRounds = work
		m.Lost, m.Dup, m.Error = 0, 0, ""
		for i, r := range rs {
			m.Lost += r.Lost
			m.Dup += r.Dup
			if r.DBUnfinished > 0 {
				m.DBUnfinished = max(m.DBUnfinished, r.DBUnfinished)
			}
			if r.Error != "" {
				if m.Error != "" {
					m.Error += "; "
				}
				m.Error += fmt.Sprintf("round %d: %s", i+1, r.Error)
			}
		}
		out = append(out, m)
	}
	return out
}

// medianIndex answers the index of the result whose value by key is the
// median of rs (the lower middle for an even count).
func medianIndex(rs []result, key func(result) float64) int {
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return key(rs[idx[a]]) < key(rs[idx[b]]) })
	return idx[(len(idx)-1)/2]
}
