package tlog_test

import (
	"fmt"

	"github.com/acsledger/acsledger/ledger/tlog"
)

func ExampleLeaf_MarshalJCS() {
	var h [32]byte
	h[0] = 0xab
	leaf, err := tlog.Leaf{SessionID: "sess-\"1\"", Position: 7, EntryHash: h}.MarshalJCS()
	if err != nil {
		panic(err)
	}
	fmt.Println(string(leaf))
	// Output:
	// {"entry_hash":"ab00000000000000000000000000000000000000000000000000000000000000","position":7,"session_id":"sess-\"1\"","v":1}
}

func ExampleTilePath() {
	fmt.Println(tlog.TilePath(0, 1234067, 256))
	fmt.Println(tlog.TilePath(2, 5, 17))
	fmt.Println(tlog.TilePath(tlog.EntriesLevel, 0, 3))
	// Output:
	// tile/0/x001/x234/067
	// tile/2/005.p/17
	// tile/entries/000.p/3
}
