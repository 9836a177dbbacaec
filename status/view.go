package status

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/metrics"
)

// tableRows is how many recent and failed batches the page lists.
const tableRows = 25

// view is what the page template shows.
type view struct {
	Title           string
	Refresh         int // seconds; 0: no reload
	Now             string
	BatchInterval   string
	Completed       int64
	Failed          int64
	Pending         int
	Recovered       int64
	Records         int64
	Quarantined     int64 // records, over the outputs
	OutputRetries   int64
	Unbatched       int64
	UnbatchedBlocks int
	AvgRate         string
	AvgDelay        string
	Warnings        []metrics.Warning
	Charts          []chart
	Shards          []shardRow
	Fleet           *fleetView
	Recent          []batchRow
	FailedBatches   []batchRow
}

type shardRow struct {
	Stream          string // the receiver's Name
	Shard           string
	State           string
	Records         int64
	Bytes           string
	Behind          string
	Latency         string
	Retries         string
	LastAdded       seq
	LatestCompleted seq
	Committed       seq
	CheckpointLag   string // "" until the first checkpoint was tried
	Held            bool
}

// seq is a sequence number shown shortened, whole in its title.
type seq struct{ Full, Short string }

func newSeq(s string) seq {
	if len(s) <= 14 {
		return seq{Full: s, Short: s}
	}
	return seq{Full: s, Short: s[:5] + "…" + s[len(s)-6:]}
}

type fleetView struct {
	Listed     string
	Err        string
	Unreadable string // items of the latest listing not read as leases
	Owners     []ownerRow
	Leases     []leaseRow
	Workers    int
}

type ownerRow struct {
	Owner  string
	Me     bool
	Count  int
	Shards []string
}

type leaseRow struct {
	Shard      string
	Owner      string
	Me         bool
	Counter    int64
	Checkpoint seq
	Parents    string
}

type batchRow struct {
	Time       string
	Records    int
	Blocks     int
	Delay      string
	Processing string
	Total      string
	Ranges     []rangeRow
	Recovered  bool
	Err        string
}

type rangeRow struct {
	Shard       string
	First, Last seq
	Count       int
}

func newView(cfg Config, s metrics.Snapshot) view {
	b := s.Batches
	v := view{
		Title:         cfg.Title,
		Now:           s.Time.Format(time.DateTime + " MST"),
		BatchInterval: formatDuration(s.BatchInterval),
		Completed:     b.Completed, Failed: b.Failed, Pending: b.Pending, Recovered: b.Recovered,
		Records: b.Records, Unbatched: b.UnbatchedRecords, UnbatchedBlocks: b.UnbatchedBlocks,
		Warnings: s.Warnings,
	}
	for _, o := range s.Outputs {
		v.Quarantined += o.Quarantined
		v.OutputRetries += o.Retries
	}
	if cfg.Refresh > 0 {
		v.Refresh = int(cfg.Refresh / time.Second)
	}
	v.Charts, v.AvgRate, v.AvgDelay = charts(s)
	me := map[string]bool{}
	for _, r := range s.Receivers {
		if r.Stats.WorkerID != "" {
			me[r.Stats.WorkerID] = true
		}
		v.Shards = append(v.Shards, shardRows(r)...)
	}
	if s.Fleet != nil {
		v.Fleet = newFleetView(s.Fleet, me)
	}
	for i := len(s.Recent) - 1; i >= 0 && len(v.Recent) < tableRows; i-- {
		v.Recent = append(v.Recent, newBatchRow(s.Recent[i]))
	}
	for i := len(s.Failed) - 1; i >= 0 && len(v.FailedBatches) < tableRows; i-- {
		v.FailedBatches = append(v.FailedBatches, newBatchRow(s.Failed[i]))
	}
	return v
}

// charts returns the four charts, the mean input rate and total delay.
func charts(s metrics.Snapshot) ([]chart, string, string) {
	rate := make([]point, len(s.Recent))
	delay := make([]point, len(s.Recent))
	proc := make([]point, len(s.Recent))
	total := make([]point, len(s.Recent))
	iv := s.BatchInterval.Seconds()
	for i, b := range s.Recent {
		t, bad := b.Time.Std(), b.Err != ""
		rate[i] = point{t, float64(b.Records) / iv, bad}
		delay[i] = point{t, b.SchedulingDelay.Seconds(), bad}
		proc[i] = point{t, b.ProcessingTime.Seconds(), bad}
		total[i] = point{t, b.TotalDelay.Seconds(), bad}
	}
	cs := []chart{
		newChart("Input rate", "records/s", rate, formatRate),
		newChart("Scheduling delay", "", delay, formatSeconds),
		newChart("Processing time", "", proc, formatSeconds),
		newChart("Total delay", "", total, formatSeconds),
	}
	return cs, cs[0].Avg, cs[3].Avg
}

func shardRows(r metrics.ReceiverSample) []shardRow {
	held := map[string]bool{}
	for _, shard := range r.Stats.Held {
		held[shard] = true
	}
	var rows []shardRow
	for _, id := range slices.Sorted(maps.Keys(r.Stats.Shards)) {
		st := r.Stats.Shards[id]
		row := shardRow{
			Stream: r.Name, Shard: id, Records: st.RecordsRead, Bytes: formatBytes(st.BytesRead),
			Behind:    formatDuration(st.Behind),
			LastAdded: newSeq(st.LastAdded), LatestCompleted: newSeq(st.LatestCompleted),
			Committed: newSeq(st.Checkpoint),
			Held:      held[id],
		}
		if lag, ok := r.CheckpointLag[id]; ok {
			row.CheckpointLag = formatDuration(lag)
		}
		switch {
		case st.Drained:
			row.State = "ended"
		case st.Ended:
			row.State = "ending"
		case st.Reading:
			row.State = "reading"
		default:
			row.State = "stopped"
		}
		if st.ReadLatency.Count() > 0 {
			row.Latency = formatDuration(st.ReadLatency.Mean())
		}
		var parts []string
		for _, cause := range slices.Sorted(maps.Keys(st.Retries)) {
			parts = append(parts, fmt.Sprintf("%s %d", cause, st.Retries[cause]))
		}
		row.Retries = strings.Join(parts, ", ")
		rows = append(rows, row)
	}
	return rows
}

func newFleetView(f *metrics.Fleet, me map[string]bool) *fleetView {
	fv := &fleetView{Err: f.Err, Unreadable: f.Unreadable, Workers: len(f.Workers)}
	if !f.Listed.IsZero() {
		fv.Listed = f.Listed.Format(time.TimeOnly)
	}
	owners := map[string]*ownerRow{}
	for _, l := range f.Leases {
		o, ok := owners[l.Owner]
		if !ok {
			o = &ownerRow{Owner: l.Owner, Me: me[l.Owner]}
			owners[l.Owner] = o
		}
		o.Count++
		o.Shards = append(o.Shards, l.Shard)
		fv.Leases = append(fv.Leases, leaseRow{
			Shard: l.Shard, Owner: l.Owner, Me: me[l.Owner], Counter: l.Counter,
			Checkpoint: newSeq(l.Checkpoint), Parents: strings.Join(l.Parents, ", "),
		})
	}
	for _, name := range slices.Sorted(maps.Keys(owners)) {
		fv.Owners = append(fv.Owners, *owners[name])
	}
	return fv
}

func newBatchRow(b metrics.BatchSample) batchRow {
	row := batchRow{
		Time: b.Time.Std().Format(time.TimeOnly + ".000"), Records: b.Records, Blocks: b.Blocks,
		Delay: formatDuration(b.SchedulingDelay), Processing: formatDuration(b.ProcessingTime),
		Total: formatDuration(b.TotalDelay), Recovered: b.Recovered, Err: b.Err,
	}
	row.Ranges = mergeRanges(b.Ranges)
	return row
}

// mergeRanges returns, per shard in order of appearance, the span of its
// ranges in a batch: from the first range's First to the last one's Last.
func mergeRanges(rs []batch.SeqRange) []rangeRow {
	var rows []rangeRow
	at := map[string]int{}
	for _, r := range rs {
		key := r.Stream + "/" + r.Shard
		i, ok := at[key]
		if !ok {
			at[key] = len(rows)
			rows = append(rows, rangeRow{Shard: r.Shard, First: newSeq(r.First), Last: newSeq(r.Last), Count: r.Count})
			continue
		}
		rows[i].Last = newSeq(r.Last)
		rows[i].Count += r.Count
	}
	return rows
}

// formatBytes writes n bytes in B, kB, MB or GB.
func formatBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
