package metrics

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// growthWindow is how many batches back, or samples back, a value must have
// been lower for it to count as growing: one high value is a blip.
const growthWindow = 3

// warnings decides when to warn. A condition is warned about once when it
// starts, again each time its value doubles, and reported over at INFO when
// it ends (a scheduling delay: once under half its warning level). Its
// methods are called with the Collector's mu held.
type warnings struct {
	batchIv    time.Duration
	delayLimit time.Duration
	lagLimit   time.Duration
	on         map[string]*warned // by kind and subject
	history    map[string][]int64 // per shard key: recent ShardStats.Behind, oldest first
}

// warned is a condition warned about that still holds.
type warned struct {
	Warning
	level int64 // the value last warned about
}

func (w *warnings) init(cfg Config) {
	w.batchIv, w.delayLimit, w.lagLimit = cfg.BatchInterval, cfg.DelayWarning, cfg.LagWarning
	w.on = make(map[string]*warned)
	w.history = make(map[string][]int64)
}

// batch checks the scheduling delay of the latest of recent.
func (w *warnings) batch(now time.Time, recent []BatchSample) []logLine {
	last := recent[len(recent)-1]
	d := last.SchedulingDelay
	growing := len(recent) > growthWindow && d > recent[len(recent)-1-growthWindow].SchedulingDelay
	key := "scheduling_delay"
	if d < w.delayLimit {
		// Ended only well under the level: a delay swinging around it
		// would otherwise log a warning and its end every other batch.
		if d >= w.delayLimit/2 {
			return nil
		}
		return w.clear(key, "metrics: scheduling delay back under its warning level", "delay", d, "warning_level", w.delayLimit)
	}
	if !growing {
		return nil
	}
	var proc time.Duration
	n := min(len(recent), 10)
	for _, b := range recent[len(recent)-n:] {
		proc += b.ProcessingTime
	}
	proc /= time.Duration(n)
	fix := "processing is slower than the input arrives: make the outputs faster, raise stream.Config.BatchInterval, or spread the shards over more workers"
	if proc < w.batchIv {
		fix = "batches take less than the batch interval on average, so a few slow ones (a slow output call, a recomputation, a GC pause) piled up: look at the processing time chart; if it keeps growing, make the outputs faster or raise stream.Config.BatchInterval"
	}
	msg := fmt.Sprintf("metrics: batches fall behind: scheduling delay %v (%.1f batch intervals of %v) and growing; processing takes %v per batch on average (last %d)",
		d.Round(time.Millisecond), float64(d)/float64(w.batchIv), w.batchIv, proc.Round(time.Millisecond), n)
	return w.raise(now, key, Warning{Kind: "scheduling_delay"}, int64(d), msg,
		"batch", last.Time, "delay", d, "batch_interval", w.batchIv, "processing_time", proc, "fix", fix)
}

// shards checks the lag of every shard in samples. The warning of a shard
// no longer read here, or no longer in its receiver's stats, ends.
func (w *warnings) shards(now time.Time, samples []ReceiverSample) []logLine {
	var out []logLine
	seen := make(map[string]bool)
	names := make(map[string]string) // by receiver index, for the warnings of shards gone
	for _, s := range samples {
		names[strconv.Itoa(s.Index)] = s.Name
		ids := make([]string, 0, len(s.Stats.Shards))
		for id := range s.Stats.Shards {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			st := s.Stats.Shards[id]
			hkey := fmt.Sprintf("%d/%s", s.Index, id)
			seen[hkey] = true
			h := append(w.history[hkey], int64(st.Behind))
			if len(h) > growthWindow+1 {
				h = h[len(h)-growthWindow-1:]
			}
			w.history[hkey] = h
			lag := st.Behind
			key := "shard_lag/" + hkey
			if !st.Reading {
				out = append(out, w.clear(key, "metrics: shard no longer read here: its lag warning ends", "stream", s.Name, "shard", id)...)
				continue
			}
			if lag < w.lagLimit {
				out = append(out, w.clear(key, "metrics: shard lag back under its warning level", "stream", s.Name, "shard", id, "behind", lag)...)
				continue
			}
			if len(h) <= growthWindow || !increasing(h) {
				continue
			}
			retries := s.Stats.Shards[id].Retries
			fix := "the shard's reader cannot keep up: if the scheduling delay grows too, processing is the bottleneck (make outputs faster, raise the batch interval, add workers); otherwise raise kinesis.Config.RecordsPerRead or lower MinReadInterval"
			if retries["throttled"] > 0 {
				fix = fmt.Sprintf("the shard was throttled %d times: its 5 reads/s and 2 MB/s are shared by every consumer of the stream: fewer consumers, enhanced fan-out, or more shards", retries["throttled"])
			}
			msg := fmt.Sprintf("metrics: a shard falls behind: %v behind the tip of the stream and growing over the last %d samples",
				lag.Round(time.Second), growthWindow) // the shard only as an attribute: its ID comes from outside
			out = append(out, w.raise(now, key, Warning{Kind: "shard_lag", Stream: s.Name, Subject: id}, int64(lag), msg,
				"stream", s.Name, "shard", id, "behind", lag, "records_read", st.RecordsRead, "fix", fix)...)
		}
	}
	for _, hkey := range slices.Sorted(maps.Keys(w.history)) {
		if !seen[hkey] {
			delete(w.history, hkey)
			index, id, _ := strings.Cut(hkey, "/")
			out = append(out, w.clear("shard_lag/"+hkey, "metrics: shard no longer reported: its lag warning ends", "stream", names[index], "shard", id)...)
		}
	}
	return out
}

// increasing reports whether h only grows.
func increasing(h []int64) bool {
	for i := 1; i < len(h); i++ {
		if h[i] <= h[i-1] {
			return false
		}
	}
	return true
}

// raise warns about key at value, unless it was warned about at more than
// half of value already; about is the warning's Kind, Stream and Subject.
func (w *warnings) raise(now time.Time, key string, about Warning, value int64, msg string, args ...any) []logLine {
	if cur, ok := w.on[key]; ok {
		if value < 2*cur.level {
			return nil
		}
		cur.level, cur.Message = value, pageMessage(msg, args)
		return []logLine{{level: slog.LevelWarn, msg: msg, args: args}}
	}
	about.Since, about.Message = now, pageMessage(msg, args)
	w.on[key] = &warned{Warning: about, level: value}
	return []logLine{{level: slog.LevelWarn, msg: msg, args: args}}
}

// clear ends key's warning, if any, with an INFO line.
func (w *warnings) clear(key, msg string, args ...any) []logLine {
	if _, ok := w.on[key]; !ok {
		return nil
	}
	delete(w.on, key)
	return []logLine{{level: slog.LevelInfo, msg: msg, args: args}}
}

// active returns the warnings that hold, by kind, stream and subject.
func (w *warnings) active() []Warning {
	out := make([]Warning, 0, len(w.on))
	for _, v := range w.on {
		out = append(out, v.Warning)
	}
	slices.SortFunc(out, func(a, b Warning) int {
		return strings.Compare(a.Kind+"\x00"+a.Stream+"\x00"+a.Subject, b.Kind+"\x00"+b.Stream+"\x00"+b.Subject)
	})
	return out
}

// pageMessage returns the Warning.Message of a log line: its message,
// without the package prefix, and its fix.
func pageMessage(msg string, args []any) string {
	return strings.TrimPrefix(msg, "metrics: ") + " (fix: " + fixOf(args) + ")"
}

// fixOf returns the value of the "fix" key of args.
func fixOf(args []any) string {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "fix" {
			return fmt.Sprint(args[i+1])
		}
	}
	return ""
}
