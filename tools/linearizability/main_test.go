package main

import (
	"testing"
	"time"
)

func verdictOf(t *testing.T, ops ...operation) string {
	t.Helper()
	v, err := check(history{Name: t.Name(), Operations: ops}, t.TempDir(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return v.Result
}

func TestRegisterHistories(t *testing.T) {
	cases := []struct {
		name string
		want string
		ops  []operation
	}{
		{"write, read it, compare-and-set from it", "Ok", []operation{
			{Client: 0, Kind: "write", Key: "a", Value: 1, Call: 0, Return: 10},
			{Client: 1, Kind: "read", Key: "a", Value: 1, Call: 11, Return: 20},
			{Client: 1, Kind: "cas", Key: "a", From: 1, To: 2, Ok: true, Call: 21, Return: 30},
			{Client: 0, Kind: "read", Key: "a", Value: 2, Call: 31, Return: 40},
		}},
		{"a read after an acknowledged write sees the old value", "Illegal", []operation{
			{Client: 0, Kind: "write", Key: "a", Value: 1, Call: 0, Return: 10},
			{Client: 0, Kind: "write", Key: "a", Value: 2, Call: 11, Return: 20},
			{Client: 1, Kind: "read", Key: "a", Value: 1, Call: 21, Return: 30},
		}},
		{"two compare-and-sets from the same value both win", "Illegal", []operation{
			{Client: 0, Kind: "write", Key: "a", Value: 1, Call: 0, Return: 10},
			{Client: 0, Kind: "cas", Key: "a", From: 1, To: 2, Ok: true, Call: 11, Return: 20},
			{Client: 1, Kind: "cas", Key: "a", From: 1, To: 3, Ok: true, Call: 12, Return: 21},
		}},
		{"keys are checked apart: a stale read of one", "Illegal", []operation{
			{Client: 0, Kind: "write", Key: "a", Value: 1, Call: 0, Return: 10},
			{Client: 1, Kind: "read", Key: "b", Value: 0, Call: 11, Return: 20},
			{Client: 1, Kind: "read", Key: "a", Value: 0, Call: 21, Return: 30},
		}},
		{"an unknown outcome that happened", "Ok", []operation{
			{Client: 0, Kind: "write", Key: "a", Value: 1, Unknown: true, Call: 0},
			{Client: 1, Kind: "read", Key: "a", Value: 1, Call: 50, Return: 60},
		}},
		{"an unknown outcome that never happened", "Ok", []operation{
			{Client: 0, Kind: "write", Key: "a", Value: 1, Unknown: true, Call: 0},
			{Client: 1, Kind: "read", Key: "a", Value: 0, Call: 50, Return: 60},
		}},
		{"an unknown outcome seen before its call", "Illegal", []operation{
			{Client: 1, Kind: "read", Key: "a", Value: 1, Call: 0, Return: 10},
			{Client: 0, Kind: "write", Key: "a", Value: 1, Unknown: true, Call: 20},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := verdictOf(t, c.ops...); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}
