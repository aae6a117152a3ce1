package main

// The two models histories are judged against: what kubecoord's API promises, written
// from its documentation, not from any backend's code.

import (
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
)

// Outcomes of an operation. "refused": a write the backend says it did not apply (a plain
// BackendUnavailableError: refused before it was sent, or answered as not applied).
// "fenced": a fenced write refused with FencedError (its token is below the highest the
// store accepted for its domain; nothing written).
// "unknown": the caller could not learn whether it took effect (the operation has no
// return; it may take effect at any moment after its call).
const (
	statusOK       = "ok"
	statusExists   = "exists"
	statusConflict = "conflict"
	statusNotFound = "notfound"
	statusRefused  = "refused"
	statusFenced   = "fenced"
	statusUnknown  = "unknown"
)

// ---- the versioned compare-and-set register, one per key ----------------------------

type kvInput struct {
	Op          string // get, put, update, delete
	Key         string
	Value       string
	HasExpected bool
	Expected    int64
	Fenced      bool  // a write with fence=Fence(domain, Token); one key per domain
	Token       int64 // the fence's token
}

type kvOutput struct {
	Status  string // get: ok (present) or notfound (absent)
	Value   string // get: the value read
	Version int64  // get: the version read; put/update: the version returned; delete: the version removed (0: unknown)
}

type kvState struct {
	Exists  bool
	Value   string
	Version int64
	Marked  bool  // a fenced write was accepted ...
	Mark    int64 // ... and this is the highest token accepted
}

// kvApply is the sequential specification of Storage: put is create-only (version 1),
// update and delete check presence then expected_version, every update adds 1. A fenced
// write is judged against its domain's mark first: a token below the highest accepted
// is refused (FencedError, nothing written); an applied fenced write makes its token
// the mark (it is never below it). The tier keeps one key per fencing domain, so a key's
// partition holds its domain's every write.
func kvApply(state kvState, in kvInput) (string, kvState) {
	if in.Fenced && in.Op != "get" {
		if state.Marked && in.Token < state.Mark {
			return statusFenced, state
		}
		status, next := kvApplyUnfenced(state, in)
		if status == statusOK {
			next.Marked, next.Mark = true, in.Token
		}
		return status, next
	}
	return kvApplyUnfenced(state, in)
}

func kvApplyUnfenced(state kvState, in kvInput) (string, kvState) {
	keep := func(next kvState) kvState { next.Marked, next.Mark = state.Marked, state.Mark; return next }
	switch in.Op {
	case "get":
		if !state.Exists {
			return statusNotFound, state
		}
		return statusOK, state
	case "put":
		if state.Exists {
			return statusExists, state
		}
		return statusOK, keep(kvState{Exists: true, Value: in.Value, Version: 1})
	case "update":
		if !state.Exists {
			return statusNotFound, state
		}
		if in.HasExpected && in.Expected != state.Version {
			return statusConflict, state
		}
		return statusOK, keep(kvState{Exists: true, Value: in.Value, Version: state.Version + 1})
	case "delete":
		if !state.Exists {
			return statusNotFound, state
		}
		if in.HasExpected && in.Expected != state.Version {
			return statusConflict, state
		}
		return statusOK, keep(kvState{})
	}
	panic(fmt.Sprintf("unknown kv operation %q", in.Op))
}

func kvStep(s, i, o interface{}) (bool, interface{}) {
	state, in, out := s.(kvState), i.(kvInput), o.(kvOutput)
	if out.Status == statusRefused {
		return in.Op != "get", state // not applied: no effect wherever it is placed
	}
	status, next := kvApply(state, in)
	if out.Status == statusUnknown {
		// Taken effect here (its outcome follows from the state); "not at all" is the
		// linearization that places it after every other operation.
		return true, next
	}
	if out.Status != status {
		return false, state
	}
	switch {
	case in.Op == "get" && status == statusOK:
		return out.Value == state.Value && out.Version == state.Version, state
	case (in.Op == "put" || in.Op == "update") && status == statusOK:
		return out.Version == next.Version, next
	case in.Op == "delete" && status == statusOK:
		// The version it removed, when the client learned it (0: not recorded).
		return out.Version == 0 || out.Version == state.Version, next
	}
	return true, next
}

func describeKV(i, o interface{}) string {
	in, out := i.(kvInput), o.(kvOutput)
	var call string
	switch in.Op {
	case "get":
		call = fmt.Sprintf("get(%s)", in.Key)
	case "delete":
		call = fmt.Sprintf("delete(%s%s)", in.Key, expected(in))
	default:
		call = fmt.Sprintf("%s(%s, %q%s)", in.Op, in.Key, in.Value, expected(in))
	}
	switch {
	case out.Status == statusOK && in.Op == "get":
		return fmt.Sprintf("%s -> %q v%d", call, out.Value, out.Version)
	case out.Status == statusOK && (in.Op == "put" || in.Op == "update"):
		return fmt.Sprintf("%s -> v%d", call, out.Version)
	case out.Status == statusOK && in.Op == "delete" && out.Version != 0:
		return fmt.Sprintf("%s -> removed v%d", call, out.Version)
	}
	return fmt.Sprintf("%s -> %s", call, out.Status)
}

func expected(in kvInput) string {
	text := ""
	if in.HasExpected {
		text = fmt.Sprintf(", expected v%d", in.Expected)
	}
	if in.Fenced {
		text += fmt.Sprintf(", fence token %d", in.Token)
	}
	return text
}

func describeKVState(s interface{}) string {
	state := s.(kvState)
	text := "absent"
	if state.Exists {
		text = fmt.Sprintf("%q v%d", state.Value, state.Version)
	}
	if state.Marked {
		text += fmt.Sprintf(", fence mark %d", state.Mark)
	}
	return text
}

var kvModel = porcupine.Model{
	Partition:         partitionBy(func(input interface{}) string { return input.(kvInput).Key }),
	Init:              func() interface{} { return kvState{} },
	Step:              kvStep,
	DescribeOperation: describeKV,
	DescribeState:     describeKVState,
}

// ---- locks and semaphores: holders' own claims ----------------------------------------
//
// A hold is two operations of its holder: acquire (returned True, with the slot and the
// fencing token) and end, whose interval runs from the last moment the holder still
// believed it held (its last is_held() == True, or acquire's return) to the moment it had
// stopped believing (release's return, the first is_held() == False; no return when the
// holder was killed or release's outcome is unknown). The model: at most max_holders
// holders, one per slot, and each slot's tokens strictly increasing.

const maxSlots = 8

type lockInput struct {
	Op         string // acquire, end
	Lock       string
	MaxHolders int
	Holder     string
	Slot       int
	Token      int64
}

type lockOutput struct {
	Status string // ok or unknown
}

type lockState struct {
	Holders [maxSlots]string
	Tokens  [maxSlots]int64
}

func lockStep(s, i, o interface{}) (bool, interface{}) {
	state, in, out := s.(lockState), i.(lockInput), o.(lockOutput)
	if in.Slot < 0 || in.Slot >= in.MaxHolders || in.Slot >= maxSlots {
		return false, state
	}
	switch in.Op {
	case "acquire":
		if out.Status == statusUnknown {
			return true, state // nothing claimed
		}
		held := 0
		for _, holder := range state.Holders {
			if holder != "" {
				held++
			}
		}
		if state.Holders[in.Slot] != "" || held >= in.MaxHolders || in.Token <= state.Tokens[in.Slot] {
			return false, state
		}
		next := state
		next.Holders[in.Slot] = in.Holder
		next.Tokens[in.Slot] = in.Token
		return true, next
	case "end":
		if state.Holders[in.Slot] != in.Holder {
			return out.Status == statusUnknown, state
		}
		next := state
		next.Holders[in.Slot] = ""
		return true, next
	}
	panic(fmt.Sprintf("unknown lock operation %q", in.Op))
}

func describeLock(i, o interface{}) string {
	in, out := i.(lockInput), o.(lockOutput)
	if in.Op == "acquire" {
		return fmt.Sprintf("%s acquires %s slot %d, token %d", in.Holder, in.Lock, in.Slot, in.Token)
	}
	suffix := ""
	if out.Status == statusUnknown {
		suffix = " (end unknown)"
	}
	return fmt.Sprintf("%s stops holding %s slot %d%s", in.Holder, in.Lock, in.Slot, suffix)
}

func describeLockState(s interface{}) string {
	state := s.(lockState)
	text := ""
	for slot := 0; slot < maxSlots; slot++ {
		if state.Holders[slot] == "" && state.Tokens[slot] == 0 {
			continue
		}
		holder := state.Holders[slot]
		if holder == "" {
			holder = "free"
		}
		text += fmt.Sprintf("[slot %d: %s, last token %d] ", slot, holder, state.Tokens[slot])
	}
	if text == "" {
		return "free"
	}
	return text
}

var lockModel = porcupine.Model{
	Partition:         partitionBy(func(input interface{}) string { return input.(lockInput).Lock }),
	Init:              func() interface{} { return lockState{} },
	Step:              lockStep,
	DescribeOperation: describeLock,
	DescribeState:     describeLockState,
}

func partitionBy(name func(input interface{}) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(history []porcupine.Operation) [][]porcupine.Operation {
		groups := map[string][]porcupine.Operation{}
		for _, op := range history {
			key := name(op.Input)
			groups[key] = append(groups[key], op)
		}
		keys := make([]string, 0, len(groups))
		for key := range groups {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		partitions := make([][]porcupine.Operation, 0, len(keys))
		for _, key := range keys {
			partitions = append(partitions, groups[key])
		}
		return partitions
	}
}
