// kubecoord-porcupine: judges a recorded history of kubecoord operations with Porcupine.
//
//	kubecoord-porcupine [-out DIR] [-timeout 120s] [-window 16] HISTORY.json
//
// HISTORY.json holds "kv" and "locks" operations (client, call, return, input, output;
// a kv write's input may carry "fence": TOKEN, its output the status "fenced";
// times in seconds on one monotonic clock; "return": null for an operation whose outcome
// is unknown) and optional "faults" (shown in the visualisation). Prints one JSON report
// on stdout. Exit status: 0 linearizable, 1 a violation (the history, Porcupine's HTML
// visualisation and the smallest failing window are written to -out), 2 bad input,
// 3 the check timed out (no verdict).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

type rawOp struct {
	Client int             `json:"client"`
	Call   float64         `json:"call"`
	Return *float64        `json:"return"`
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output"`
}

type rawFault struct {
	At    float64 `json:"at"`
	Until float64 `json:"until"`
	What  string  `json:"what"`
}

type rawHistory struct {
	KV     []rawOp    `json:"kv"`
	Locks  []rawOp    `json:"locks"`
	Faults []rawFault `json:"faults"`
}

type modelReport struct {
	Result     string  `json:"result"`
	Operations int     `json:"operations"`
	Pending    int     `json:"pending"`
	Partitions int     `json:"partitions"`
	Seconds    float64 `json:"seconds"`
}

type violation struct {
	Model         string   `json:"model"`
	Partition     string   `json:"partition"`
	Until         float64  `json:"until"`
	Operations    int      `json:"operations"`
	Window        []string `json:"window"`
	Visualization string   `json:"visualization"`
}

type report struct {
	KV         modelReport `json:"kv"`
	Locks      modelReport `json:"locks"`
	Violations []violation `json:"violations"`
	Out        string      `json:"out,omitempty"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("kubecoord-porcupine", flag.ContinueOnError)
	flags.SetOutput(stderr)
	out := flags.String("out", "", "where a failing history and its visualisation go (default: beside HISTORY)")
	timeout := flags.Duration("timeout", 120*time.Second, "per model; 0 is no limit")
	windowOps := flags.Int("window", 16, "operations of the smallest failing window to print")
	if err := flags.Parse(args); err != nil || flags.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: kubecoord-porcupine [-out DIR] [-timeout 120s] [-window 16] HISTORY.json")
		return 2
	}
	path := flags.Arg(0)
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	var raw rawHistory
	if err := json.Unmarshal(data, &raw); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", path, err)
		return 2
	}
	end := lastTime(raw) + 1
	kvOps, err := convert(raw.KV, end, parseKV)
	if err == nil {
		var lockOps []porcupine.Operation
		lockOps, err = convert(raw.Locks, end, parseLock)
		if err == nil {
			return judge(kvOps, lockOps, raw, data, path, *out, *timeout, *windowOps, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: %v\n", path, err)
	return 2
}

func judge(kvOps, lockOps []porcupine.Operation, raw rawHistory, data []byte, path, out string,
	timeout time.Duration, windowOps int, stdout, stderr io.Writer) int {
	var rep report
	var infos []porcupine.LinearizationInfo
	var models []porcupine.Model
	var names []string
	for _, m := range []struct {
		name  string
		model porcupine.Model
		ops   []porcupine.Operation
		rep   *modelReport
	}{{"kv", kvModel, kvOps, &rep.KV}, {"locks", lockModel, lockOps, &rep.Locks}} {
		started := time.Now()
		result, info := porcupine.CheckOperationsVerbose(m.model, m.ops, timeout)
		*m.rep = modelReport{
			Result: string(result), Operations: len(m.ops), Pending: pending(m.ops, raw),
			Partitions: len(m.model.Partition(m.ops)), Seconds: time.Since(started).Seconds(),
		}
		if result == porcupine.Illegal {
			infos, models, names = append(infos, info), append(models, m.model), append(names, m.name)
		}
	}
	if len(infos) > 0 {
		if out == "" {
			out = filepath.Join(filepath.Dir(path), "porcupine")
		}
		rep.Out = out
		if err := os.MkdirAll(out, 0o755); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if err := os.WriteFile(filepath.Join(out, "history.json"), data, 0o644); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		for index, info := range infos {
			info.AddAnnotations(faultAnnotations(raw.Faults))
			file := filepath.Join(out, names[index]+".html")
			if err := porcupine.VisualizePath(models[index], info, file); err != nil {
				fmt.Fprintln(stderr, err)
			}
			ops := kvOps
			if names[index] == "locks" {
				ops = lockOps
			}
			rep.Violations = append(rep.Violations, windows(names[index], models[index], ops, raw, out, timeout, windowOps)...)
		}
	}
	encoded, _ := json.Marshal(rep)
	fmt.Fprintln(stdout, string(encoded))
	for _, v := range rep.Violations {
		fmt.Fprintf(stderr, "NOT LINEARIZABLE: %s %q: no linearization of its %d operations up to t=%.6f s "+
			"(the smallest failing prefix; %s); its last operations:\n", v.Model, v.Partition, v.Operations, v.Until, v.Visualization)
		for _, line := range v.Window {
			fmt.Fprintln(stderr, "  "+line)
		}
	}
	switch {
	case len(rep.Violations) > 0:
		return 1
	case rep.KV.Result == string(porcupine.Unknown) || rep.Locks.Result == string(porcupine.Unknown):
		return 3
	}
	return 0
}

func pending(ops []porcupine.Operation, raw rawHistory) int {
	count := 0
	for _, op := range ops {
		if op.Output == nil || isUnknown(op.Output) {
			count++
		}
	}
	return count
}

func isUnknown(output interface{}) bool {
	switch out := output.(type) {
	case kvOutput:
		return out.Status == statusUnknown
	case lockOutput:
		return out.Status == statusUnknown
	}
	return false
}

func faultAnnotations(faults []rawFault) []porcupine.Annotation {
	var annotations []porcupine.Annotation
	for _, fault := range faults {
		until := fault.Until
		if until < fault.At {
			until = fault.At
		}
		annotations = append(annotations, porcupine.Annotation{
			Tag: "faults", Start: nanos(fault.At), End: nanos(until), Description: fault.What,
			BackgroundColor: "#f7d7d7",
		})
	}
	return annotations
}

// windows finds, for each partition that fails, the shortest prefix of the history (cut
// at an operation's return, later returns becoming unknown outcomes) that already has no
// linearization, visualises it and lists its last operations: the smallest failing window.
func windows(name string, model porcupine.Model, ops []porcupine.Operation, raw rawHistory, out string,
	timeout time.Duration, keep int) []violation {
	single := model
	single.Partition = nil
	var found []violation
	for _, partition := range model.Partition(ops) {
		if porcupine.CheckOperationsTimeout(single, partition, timeout) != porcupine.Illegal {
			continue
		}
		var cuts []int64
		for _, op := range partition {
			if !isUnknown(op.Output) {
				cuts = append(cuts, op.Return)
			}
		}
		sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
		first := sort.Search(len(cuts), func(i int) bool {
			return porcupine.CheckOperationsTimeout(single, truncate(partition, cuts[i]), timeout) == porcupine.Illegal
		})
		prefix := partition
		until := int64(math.MaxInt64)
		if first < len(cuts) {
			until = cuts[first]
			prefix = truncate(partition, until)
		}
		label := partitionName(prefix[0].Input)
		_, info := porcupine.CheckOperationsVerbose(single, prefix, timeout)
		info.AddAnnotations(faultAnnotations(raw.Faults))
		file := filepath.Join(out, fmt.Sprintf("%s-%s-window.html", name, sanitize(label)))
		if err := porcupine.VisualizePath(single, info, file); err != nil {
			file = err.Error()
		}
		sorted := append([]porcupine.Operation(nil), prefix...)
		sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
		if len(sorted) > keep {
			sorted = sorted[len(sorted)-keep:]
		}
		var lines []string
		for _, op := range sorted {
			ret := "no return (unknown outcome)"
			if !isUnknown(op.Output) {
				ret = fmt.Sprintf("returned %.6f", seconds(op.Return))
			}
			lines = append(lines, fmt.Sprintf("client %d: called %.6f, %s: %s", op.ClientId, seconds(op.Call), ret,
				model.DescribeOperation(op.Input, op.Output)))
		}
		found = append(found, violation{
			Model: name, Partition: label, Until: seconds(until), Operations: len(prefix), Window: lines,
			Visualization: file,
		})
	}
	return found
}

// truncate is the history as it stood at “at“: operations called later are left out, and
// those that had not returned yet have an unknown outcome. A history that is linearizable
// has every truncation linearizable, so the first failing cut is found by bisection.
func truncate(ops []porcupine.Operation, at int64) []porcupine.Operation {
	var kept []porcupine.Operation
	end := int64(0)
	for _, op := range ops {
		if op.Call <= at && op.Return > end {
			end = op.Return
		}
	}
	for _, op := range ops {
		if op.Call > at {
			continue
		}
		if op.Return > at {
			op.Output = unknownOf(op.Output)
			op.Return = end + 1
		}
		kept = append(kept, op)
	}
	return kept
}

func unknownOf(output interface{}) interface{} {
	switch output.(type) {
	case kvOutput:
		return kvOutput{Status: statusUnknown}
	case lockOutput:
		return lockOutput{Status: statusUnknown}
	}
	return output
}

func partitionName(input interface{}) string {
	switch in := input.(type) {
	case kvInput:
		return in.Key
	case lockInput:
		return in.Lock
	}
	return ""
}

func sanitize(name string) string {
	runes := []rune(name)
	for i, r := range runes {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			runes[i] = '_'
		}
	}
	return string(runes)
}

func nanos(t float64) int64   { return int64(math.Round(t * 1e9)) }
func seconds(t int64) float64 { return float64(t) / 1e9 }

func lastTime(raw rawHistory) float64 {
	last := 0.0
	for _, ops := range [][]rawOp{raw.KV, raw.Locks} {
		for _, op := range ops {
			last = math.Max(last, op.Call)
			if op.Return != nil {
				last = math.Max(last, *op.Return)
			}
		}
	}
	for _, fault := range raw.Faults {
		last = math.Max(last, math.Max(fault.At, fault.Until))
	}
	return last
}

func convert(raw []rawOp, end float64, parse func(rawOp) (interface{}, interface{}, error)) ([]porcupine.Operation, error) {
	ops := make([]porcupine.Operation, 0, len(raw))
	for index, op := range raw {
		in, out, err := parse(op)
		if err != nil {
			return nil, fmt.Errorf("operation %d: %v", index, err)
		}
		if op.Client < 0 {
			return nil, fmt.Errorf("operation %d: client ids are >= 0", index)
		}
		ret := end
		if op.Return != nil {
			ret = *op.Return
			if ret < op.Call {
				return nil, fmt.Errorf("operation %d returns (%f) before its call (%f)", index, ret, op.Call)
			}
		}
		ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: in, Call: nanos(op.Call), Output: out, Return: nanos(ret)})
	}
	return ops, nil
}

func parseKV(op rawOp) (interface{}, interface{}, error) {
	var in struct {
		Op       string `json:"op"`
		Key      string `json:"key"`
		Value    string `json:"value"`
		Expected *int64 `json:"expected_version"`
		Fence    *int64 `json:"fence"`
	}
	var out struct {
		Status  string `json:"status"`
		Value   string `json:"value"`
		Version int64  `json:"version"`
	}
	if err := json.Unmarshal(op.Input, &in); err != nil {
		return nil, nil, err
	}
	switch in.Op {
	case "get", "put", "update", "delete":
	default:
		return nil, nil, fmt.Errorf("unknown kv op %q", in.Op)
	}
	input := kvInput{Op: in.Op, Key: in.Key, Value: in.Value}
	if in.Expected != nil {
		input.HasExpected, input.Expected = true, *in.Expected
	}
	if in.Fence != nil {
		if in.Op == "get" {
			return nil, nil, fmt.Errorf("a get takes no fence")
		}
		input.Fenced, input.Token = true, *in.Fence
	}
	if op.Return == nil {
		return input, kvOutput{Status: statusUnknown}, nil
	}
	if err := json.Unmarshal(op.Output, &out); err != nil {
		return nil, nil, err
	}
	switch out.Status {
	case statusOK, statusExists, statusConflict, statusNotFound, statusRefused:
	case statusFenced:
		if !input.Fenced {
			return nil, nil, fmt.Errorf("kv status fenced of a write without a fence")
		}
	default:
		return nil, nil, fmt.Errorf("kv status %q of a returned operation (ok, exists, conflict, notfound, refused, fenced)",
			out.Status)
	}
	return input, kvOutput{Status: out.Status, Value: out.Value, Version: out.Version}, nil
}

func parseLock(op rawOp) (interface{}, interface{}, error) {
	var in struct {
		Op         string `json:"op"`
		Lock       string `json:"lock"`
		MaxHolders int    `json:"max_holders"`
		Holder     string `json:"holder"`
		Slot       int    `json:"slot"`
		Token      int64  `json:"token"`
	}
	if err := json.Unmarshal(op.Input, &in); err != nil {
		return nil, nil, err
	}
	if in.Op != "acquire" && in.Op != "end" {
		return nil, nil, fmt.Errorf("unknown lock op %q (acquire, end)", in.Op)
	}
	if in.MaxHolders < 1 || in.MaxHolders > maxSlots || in.Holder == "" {
		return nil, nil, fmt.Errorf("lock ops need a holder and 1 <= max_holders <= %d", maxSlots)
	}
	if in.Op == "acquire" && op.Return == nil {
		return nil, nil, fmt.Errorf("an acquire without a return claims nothing: leave it out")
	}
	status := statusOK
	if op.Return == nil {
		status = statusUnknown
	}
	return lockInput{Op: in.Op, Lock: in.Lock, MaxHolders: in.MaxHolders, Holder: in.Holder, Slot: in.Slot, Token: in.Token},
		lockOutput{Status: status}, nil
}
