package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The beat board is one lease item of the table, the one with the smallest
// leaseKey, on which every worker that holds leases writes its beat: it
// adds one to its own attribute "weirBeat:<worker ID> <incarnation>" every
// RenewInterval. The write changes neither the lease's owner nor its
// counter, so it interferes with no conditional write of the lease's
// holder, and the KCL ignores the attribute. The write asks for the item as
// written (ReturnValues ALL_NEW), which DynamoDB returns read consistently
// and without charging read units: each beat shows the writer every other
// worker's beat, so a worker that holds leases judges the others alive at
// no read cost, whatever the number of workers and leases. A worker
// without leases reads the board instead (one eventually consistent read
// per TakeInterval).
//
// Each beat is conditional on the value the worker's previous beat wrote,
// so it fails (errBeatRefused) once another worker removed it: a worker
// that takes the leases of another it judges dead first removes that
// worker's beat, if it is still the one seen (killBeat). A worker that was
// not dead, only slow or suspended, finds its next beat refused, renews
// each lease on its own before trusting it again, and starts a new
// incarnation: a fresh attribute, whose first beat is followed by a
// renewal of each lease before beats vouch for them. So a lease is only
// ever extended by its own conditional write or by a beat that proves no
// other worker took its holder for dead since that write, even if the
// holder's clock stood still meanwhile (a suspended host).
//
// A worker that steals a lease leaves a notice for its owner on the board
// ("weirStolen:<owner>"), read by the owner's next beat; the beat after
// deletes the notices acted on. Beats that stood still for
// beatForgetAfter are removed by the next beat of any worker, so a table
// whose workers restart with fresh IDs keeps a small board; a worker that
// drains its leases removes its own beat, which tells the others to scan
// and take them at once.

// beatForgetAfter is, in LeaseDurations, how long a beat must stand still
// on the board (on the observer's clock) before another worker removes it:
// by then its worker's leases were long taken, and if it runs again its
// next beat is refused and it starts a new incarnation.
const beatForgetAfter = 6

// errBeatRefused is returned by a beat whose condition failed: the board's
// lease item is gone (a KCL deleted a finished shard's lease), or this
// worker's beat is not the one its last beat wrote, because another worker
// took it for dead and removed it (killBeat), or forgot it. Either way the
// worker renews each lease on its own before trusting it again, and picks
// the board anew at its next scan.
var errBeatRefused = errors.New("leasetable: beat refused: the board's lease item is gone, or another worker removed this worker's beat")

// beatAttr is the beat attribute of worker's incarnation inc.
func beatAttr(worker, inc string) string { return attrBeatPrefix + worker + " " + inc }

func noticeAttr(worker string) string { return attrNoticePrefix + worker }

// newIncarnation returns a fresh incarnation name: 8 random hex digits.
func newIncarnation() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// beatVal is one beat on the board: its worker and count.
type beatVal struct {
	worker string
	n      int64
}

// beatsOf returns the beats on item: attribute name -> beat. An attribute
// that is not a number, or whose name has no incarnation, is not a beat.
func beatsOf(item map[string]types.AttributeValue) map[string]beatVal {
	var beats map[string]beatVal
	for name, v := range item {
		rest, ok := strings.CutPrefix(name, attrBeatPrefix)
		i := strings.LastIndexByte(rest, ' ')
		n, isNum := v.(*types.AttributeValueMemberN)
		if !ok || i <= 0 || !isNum {
			continue
		}
		c, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			continue
		}
		if beats == nil {
			beats = make(map[string]beatVal)
		}
		beats[name] = beatVal{worker: rest[:i], n: c}
	}
	return beats
}

// noticesOf returns the steal notices for worker on item.
func noticesOf(item map[string]types.AttributeValue, worker string) []string {
	if ss, ok := item[noticeAttr(worker)].(*types.AttributeValueMemberSS); ok {
		return ss.Value
	}
	return nil
}

// orphanNotices returns the notices on item of workers without a beat on
// it (notice attribute -> its notices): they reach no one, unless their
// worker's first beat comes soon.
func orphanNotices(item map[string]types.AttributeValue, beats map[string]beatVal) map[string][]string {
	beating := make(map[string]bool, len(beats))
	for _, b := range beats {
		beating[b.worker] = true
	}
	var out map[string][]string
	for name, v := range item {
		w, ok := strings.CutPrefix(name, attrNoticePrefix)
		ss, isSet := v.(*types.AttributeValueMemberSS)
		if !ok || beating[w] || !isSet || len(ss.Value) == 0 {
			continue
		}
		if out == nil {
			out = make(map[string][]string)
		}
		out[name] = ss.Value
	}
	return out
}

// stealNotice is the notice that shard was stolen and is at counter.
func stealNotice(shard string, counter int64) string {
	return shard + " " + strconv.FormatInt(counter, 10)
}

// parseStealNotice parses a stealNotice.
func parseStealNotice(n string) (shard string, counter int64, ok bool) {
	i := strings.LastIndexByte(n, ' ')
	if i < 0 {
		return "", 0, false
	}
	c, err := strconv.ParseInt(n[i+1:], 10, 64)
	return n[:i], c, err == nil
}

// boardWrite is one write of weir's own attributes on the board item,
// conditional on the item existing and on cond if not empty: update and
// cond name their aliases #a0, #a1, ..., given in attrs in that order. A
// failed condition returns errBeatRefused and false.
func (t *Table) boardWrite(ctx context.Context, board, update, cond string, attrs []string, values map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	names := map[string]string{"#key": attrKey}
	for i, a := range attrs {
		names["#a"+strconv.Itoa(i)] = a
	}
	condition := "attribute_exists(#key)"
	if cond != "" {
		condition += " AND " + cond
	}
	out, err := t.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &t.name,
		Key:                       keyOf(board),
		UpdateExpression:          &update,
		ConditionExpression:       &condition,
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	}, t.opts...)
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return nil, fmt.Errorf("%w (board %s)", errBeatRefused, board)
	case err != nil:
		return nil, fmt.Errorf("leasetable: beat board %s: %w", board, err)
	}
	return out.Attributes, nil
}

// beat adds one to the beat attribute name of me on board, if it is still
// prev (the value the previous beat wrote; 0: a new incarnation, whose
// attribute must not exist yet), deletes the notices for me in ack (acted
// on) and the notices in orphans (notice attribute -> the notices seen
// there without a beat of their worker), removes the attributes in forget
// (beats and notices of gone workers), and returns every beat, me's
// included, the notices for me, and the notices of workers without a beat
// (orphanNotices), as written. An orphan's notices are deleted one by one,
// never its attribute: a notice written after they were seen is for a
// worker whose first beat on board may still come (see sendNotice).
func (t *Table) beat(ctx context.Context, board, name, me string, prev int64, ack, forget []string, orphans map[string][]string) (beats map[string]beatVal, notices []string, orphaned map[string][]string, err error) {
	attrs := []string{name}
	update, cond := "ADD #a0 :one", "attribute_not_exists(#a0)"
	values := map[string]types.AttributeValue{":one": num(1)}
	if prev > 0 {
		cond = "#a0 = :prev"
		values[":prev"] = num(prev)
	}
	var del []string
	if len(ack) > 0 {
		del = append(del, "#a"+strconv.Itoa(len(attrs))+" :ack")
		attrs = append(attrs, noticeAttr(me))
		values[":ack"] = &types.AttributeValueMemberSS{Value: ack}
	}
	for _, a := range slices.Sorted(maps.Keys(orphans)) {
		if len(orphans[a]) == 0 || a == noticeAttr(me) || slices.Contains(forget, a) {
			continue // nothing to delete, or a path written otherwise: DynamoDB refuses overlapping paths
		}
		v := ":o" + strconv.Itoa(len(attrs))
		del = append(del, "#a"+strconv.Itoa(len(attrs))+" "+v)
		attrs = append(attrs, a)
		values[v] = &types.AttributeValueMemberSS{Value: orphans[a]}
	}
	if len(del) > 0 {
		update += " DELETE " + strings.Join(del, ", ")
	}
	var remove []string
	for _, a := range forget {
		remove = append(remove, "#a"+strconv.Itoa(len(attrs)))
		attrs = append(attrs, a)
	}
	if len(remove) > 0 {
		update += " REMOVE " + strings.Join(remove, ", ")
	}
	item, err := t.boardWrite(ctx, board, update, cond, attrs, values)
	if err != nil {
		return nil, nil, nil, err
	}
	beats = beatsOf(item)
	return beats, noticesOf(item, me), orphanNotices(item, beats), nil
}

// killBeat removes the beat attribute name from board if it is still seen
// (or already gone), before leases of its worker, taken for dead, are
// taken: the worker's next beat is then refused (see above). It reports
// false if the worker beat since: it is alive.
func (t *Table) killBeat(ctx context.Context, board, name string, seen int64) (bool, error) {
	_, err := t.boardWrite(ctx, board, "REMOVE #a0", "(#a0 = :seen OR attribute_not_exists(#a0))",
		[]string{name}, map[string]types.AttributeValue{":seen": num(seen)})
	if errors.Is(err, errBeatRefused) {
		return false, nil
	}
	return err == nil, err
}

// unbeat removes the beat attribute name of me, and me's notices, from
// board.
func (t *Table) unbeat(ctx context.Context, board, name, me string) error {
	_, err := t.boardWrite(ctx, board, "REMOVE #a0, #a1", "", []string{name, noticeAttr(me)}, nil)
	return err
}

// noteSteal leaves on board the notice for owner that shard was stolen
// from it and is now at counter.
func (t *Table) noteSteal(ctx context.Context, board, owner, shard string, counter int64) error {
	_, err := t.boardWrite(ctx, board, "ADD #a0 :n", "", []string{noticeAttr(owner)}, map[string]types.AttributeValue{
		":n": &types.AttributeValueMemberSS{Value: []string{stealNotice(shard, counter)}},
	})
	return err
}

// readBeat returns the beat attribute name on board, read consistently:
// 0 if it or the item is gone.
func (t *Table) readBeat(ctx context.Context, board, name string) (int64, error) {
	out, err := t.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &t.name, Key: keyOf(board), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#a0"), ExpressionAttributeNames: map[string]string{"#a0": name},
	}, t.opts...)
	if err != nil {
		return 0, fmt.Errorf("leasetable: read beat board %s: %w", board, err)
	}
	n, ok := out.Item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(n.Value, 10, 64)
}

// peekBoard reads the beats on board, eventually consistently (half a read
// unit): a beat may be older than its last write, which seeBeatsLocked
// allows for. ok is false if the item is gone.
func (t *Table) peekBoard(ctx context.Context, board string) (beats map[string]beatVal, ok bool, err error) {
	out, err := t.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &t.name, Key: keyOf(board), ConsistentRead: aws.Bool(false),
	}, t.opts...)
	if err != nil {
		return nil, false, fmt.Errorf("leasetable: read beat board %s: %w", board, err)
	}
	if out.Item == nil {
		return nil, false, nil
	}
	return beatsOf(out.Item), true, nil
}
