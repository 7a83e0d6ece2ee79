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

func TestARegisterHistory(t *testing.T) {
	// Write 1, then a read that sees it, then a compare-and-set from 1 to 2.
	if got := verdictOf(t,
		operation{Client: 0, Kind: "write", Key: "a", Value: 1, Call: 0, Return: 10},
		operation{Client: 1, Kind: "read", Key: "a", Value: 1, Call: 11, Return: 20},
		operation{Client: 1, Kind: "cas", Key: "a", From: 1, To: 2, Ok: true, Call: 21, Return: 30},
		operation{Client: 0, Kind: "read", Key: "a", Value: 2, Call: 31, Return: 40},
	); got != "Ok" {
		t.Fatalf("a sequential history: %s", got)
	}
}

func TestAStaleReadIsIllegal(t *testing.T) {
	// A read that starts after a write was acknowledged and still sees the old value.
	if got := verdictOf(t,
		operation{Client: 0, Kind: "write", Key: "a", Value: 1, Call: 0, Return: 10},
		operation{Client: 0, Kind: "write", Key: "a", Value: 2, Call: 11, Return: 20},
		operation{Client: 1, Kind: "read", Key: "a", Value: 1, Call: 21, Return: 30},
	); got != "Illegal" {
		t.Fatalf("a stale read: %s", got)
	}
}

func TestALostCompareAndSetIsIllegal(t *testing.T) {
	// Two successful compare-and-sets from the same value: one was applied twice or lost.
	if got := verdictOf(t,
		operation{Client: 0, Kind: "write", Key: "a", Value: 1, Call: 0, Return: 10},
		operation{Client: 0, Kind: "cas", Key: "a", From: 1, To: 2, Ok: true, Call: 11, Return: 20},
		operation{Client: 1, Kind: "cas", Key: "a", From: 1, To: 3, Ok: true, Call: 12, Return: 21},
	); got != "Illegal" {
		t.Fatalf("two winners: %s", got)
	}
}

func TestAnUnknownOutcomeMayOrMayNotHaveHappened(t *testing.T) {
	happened := verdictOf(t,
		operation{Client: 0, Kind: "write", Key: "a", Value: 1, Unknown: true, Call: 0},
		operation{Client: 1, Kind: "read", Key: "a", Value: 1, Call: 50, Return: 60},
	)
	never := verdictOf(t,
		operation{Client: 0, Kind: "write", Key: "a", Value: 1, Unknown: true, Call: 0},
		operation{Client: 1, Kind: "read", Key: "a", Value: 0, Call: 50, Return: 60},
	)
	before := verdictOf(t,
		operation{Client: 1, Kind: "read", Key: "a", Value: 1, Call: 0, Return: 10},
		operation{Client: 0, Kind: "write", Key: "a", Value: 1, Unknown: true, Call: 20},
	)
	if happened != "Ok" || never != "Ok" || before != "Illegal" {
		t.Fatalf("unknown outcomes: %s %s %s", happened, never, before)
	}
}

func TestKeysAreCheckedApart(t *testing.T) {
	if got := verdictOf(t,
		operation{Client: 0, Kind: "write", Key: "a", Value: 1, Call: 0, Return: 10},
		operation{Client: 1, Kind: "read", Key: "b", Value: 0, Call: 11, Return: 20},
		operation{Client: 1, Kind: "read", Key: "a", Value: 0, Call: 21, Return: 30},
	); got != "Illegal" {
		t.Fatalf("a stale read of a: %s", got)
	}
}
