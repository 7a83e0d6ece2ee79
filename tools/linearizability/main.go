// Command linearizability checks histories of register operations recorded against a
// Basalt replica set (scripts/failover.py) with Porcupine, an existing linearizability
// checker: each key is a register that clients read (readConcern "linearizable"),
// write (w: "majority") and compare-and-set (findAndModify), and a history is
// linearizable if every key's operations are.
//
// Input (the file named by the first argument): a JSON array of histories,
//
//	[{"name": "trial 3 (kill)", "operations": [{"client": 0, "kind": "cas", "key": "k1",
//	  "value": 0, "from": 7, "to": 9, "ok": true, "unknown": false,
//	  "call": 1200, "return": 3400}, ...]}, ...]
//
// where value is what a write wrote or a read saw (0: the key had no document), call and
// return are the client's monotonic clock in nanoseconds, and unknown marks an
// operation whose outcome the client never learned (its call failed): it may have taken
// effect at any time after its call, or never. Output: one JSON line per history with
// Porcupine's verdict (Ok, Illegal, or Unknown when the check timed out); for an
// illegal one, an HTML visualisation is written beside the input. The exit status is 1
// when any history is illegal.
package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

type operation struct {
	Client  int    `json:"client"`
	Kind    string `json:"kind"`
	Key     string `json:"key"`
	Value   int64  `json:"value"`
	From    int64  `json:"from"`
	To      int64  `json:"to"`
	Ok      bool   `json:"ok"`
	Unknown bool   `json:"unknown"`
	Call    int64  `json:"call"`
	Return  int64  `json:"return"`
}

type history struct {
	Name       string      `json:"name"`
	Operations []operation `json:"operations"`
}

type verdict struct {
	Name          string `json:"name"`
	Result        string `json:"result"`
	Operations    int    `json:"operations"`
	Unknown       int    `json:"unknown_outcomes"`
	Visualization string `json:"visualization,omitempty"`
}

// A register per key: its state is the value stored (0: no document).
var register = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			key := op.Input.(operation).Key
			if _, seen := byKey[key]; !seen {
				keys = append(keys, key)
			}
			byKey[key] = append(byKey[key], op)
		}
		partitions := make([][]porcupine.Operation, 0, len(keys))
		for _, key := range keys {
			partitions = append(partitions, byKey[key])
		}
		return partitions
	},
	Init: func() interface{} { return int64(0) },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		stored := state.(int64)
		op := input.(operation)
		switch op.Kind {
		case "read":
			return op.Value == stored, stored
		case "write":
			return true, op.Value
		case "cas":
			switch {
			// Placed at the very end when it did not happen, so taking effect whenever
			// it can is the only choice the checker needs.
			case op.Unknown && stored == op.From:
				return true, op.To
			case op.Unknown:
				return true, stored
			case op.Ok:
				return stored == op.From, op.To
			default:
				return stored != op.From, stored
			}
		}
		return false, stored
	},
	DescribeOperation: func(input, output interface{}) string {
		op, ok := input.(operation)
		if !ok {
			return ""
		}
		suffix := ""
		if op.Unknown {
			suffix = " (outcome unknown)"
		}
		switch op.Kind {
		case "read":
			return fmt.Sprintf("read(%s) -> %d", op.Key, op.Value)
		case "write":
			return fmt.Sprintf("write(%s, %d)%s", op.Key, op.Value, suffix)
		default:
			return fmt.Sprintf("cas(%s, %d -> %d) -> %v%s", op.Key, op.From, op.To, op.Ok, suffix)
		}
	},
	DescribeState: func(state interface{}) string { return fmt.Sprint(state.(int64)) },
}

func check(h history, directory string, timeout time.Duration) (verdict, error) {
	latest := int64(0)
	for _, op := range h.Operations {
		if op.Return > latest {
			latest = op.Return
		}
	}
	operations := make([]porcupine.Operation, 0, len(h.Operations))
	unknown := 0
	for _, op := range h.Operations {
		returned := op.Return
		if op.Unknown {
			// It may take effect at any time after its call, or never.
			unknown++
			returned = latest + 1
			if returned == math.MaxInt64 {
				return verdict{}, fmt.Errorf("%s: clock overflow", h.Name)
			}
		}
		operations = append(operations, porcupine.Operation{
			ClientId: op.Client,
			Input:    op,
			Call:     op.Call,
			Output:   nil,
			Return:   returned,
		})
	}
	result, info := porcupine.CheckOperationsVerbose(register, operations, timeout)
	v := verdict{Name: h.Name, Result: string(result), Operations: len(operations), Unknown: unknown}
	if result == porcupine.Illegal {
		name := strings.Map(func(r rune) rune {
			if r == ' ' || r == '(' || r == ')' || r == '/' {
				return '-'
			}
			return r
		}, h.Name)
		v.Visualization = filepath.Join(directory, "linearizability-"+name+".html")
		if err := porcupine.VisualizePath(register, info, v.Visualization); err != nil {
			return v, err
		}
	}
	return v, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: linearizability HISTORIES.json")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var histories []history
	if err := json.Unmarshal(data, &histories); err != nil {
		fmt.Fprintln(os.Stderr, "bad histories:", err)
		os.Exit(2)
	}
	illegal := false
	for _, h := range histories {
		v, err := check(h, filepath.Dir(os.Args[1]), 120*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		line, _ := json.Marshal(v)
		fmt.Println(string(line))
		illegal = illegal || v.Result == string(porcupine.Illegal)
	}
	if illegal {
		os.Exit(1)
	}
}
