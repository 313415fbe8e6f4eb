package promtest

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
)

// memSeries is one series: float samples in time order.
type memSeries struct {
	lset labels.Labels
	ts   []int64 // milliseconds
	vs   []float64
}

// memStorage is a fixed set of series, queryable by label matchers.
type memStorage struct{ series []*memSeries }

// load parses series descriptions, a sample every step from time 0.
func load(lines []string, step time.Duration) (*memStorage, error) {
	st := &memStorage{}
	for _, line := range lines {
		lset, vals, err := parser.ParseSeriesDesc(line)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", line, err)
		}
		s := &memSeries{lset: lset}
		for i, v := range vals {
			if v.Omitted {
				continue
			}
			if v.Histogram != nil {
				return nil, fmt.Errorf("series %q: histograms are not supported", line)
			}
			s.ts = append(s.ts, int64(i)*step.Milliseconds())
			s.vs = append(s.vs, v.Value)
		}
		st.series = append(st.series, s)
	}
	sort.Slice(st.series, func(i, j int) bool { return labels.Compare(st.series[i].lset, st.series[j].lset) < 0 })
	return st, nil
}

func (m *memStorage) Querier(mint, maxt int64) (storage.Querier, error) {
	return &memQuerier{m: m, mint: mint, maxt: maxt}, nil
}

type memQuerier struct {
	m          *memStorage
	mint, maxt int64
}

func (q *memQuerier) matching(ms []*labels.Matcher) []*memSeries {
	var out []*memSeries
next:
	for _, s := range q.m.series {
		for _, m := range ms {
			if !m.Matches(s.lset.Get(m.Name)) {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// Select returns the matching series (sorted: they are kept sorted),
// their samples within the querier's range.
func (q *memQuerier) Select(_ context.Context, _ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	set := &seriesSet{i: -1}
	for _, s := range q.matching(ms) {
		c := &memSeries{lset: s.lset}
		for i, t := range s.ts {
			if t >= q.mint && t <= q.maxt {
				c.ts, c.vs = append(c.ts, t), append(c.vs, s.vs[i])
			}
		}
		set.series = append(set.series, c)
	}
	return set
}

func (q *memQuerier) LabelValues(_ context.Context, name string, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	seen := map[string]bool{}
	for _, s := range q.matching(ms) {
		if v := s.lset.Get(name); v != "" {
			seen[v] = true
		}
	}
	return sortedKeys(seen), nil, nil
}

func (q *memQuerier) LabelNames(_ context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	seen := map[string]bool{}
	for _, s := range q.matching(ms) {
		s.lset.Range(func(l labels.Label) { seen[l.Name] = true })
	}
	return sortedKeys(seen), nil, nil
}

func (q *memQuerier) Close() error { return nil }

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type seriesSet struct {
	series []*memSeries
	i      int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

func (s *memSeries) Labels() labels.Labels { return s.lset }

// Iterator walks the samples as Prometheus stores them: an XOR chunk.
func (s *memSeries) Iterator(chunkenc.Iterator) chunkenc.Iterator {
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		return chunkenc.NewNopIterator()
	}
	for i, t := range s.ts {
		app.Append(0, t, s.vs[i])
	}
	return c.Iterator(nil)
}
