package guardian_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/guardian"
)

// TestBatchCap: a batch longer than MaxBatch is refused whole with one
// signed -32600 naming the cap, quickly and in a small reply, however many
// elements it holds; a batch of exactly MaxBatch is answered element by
// element. The attack: a 1 MiB body of 524,287 elements, each of which was
// answered with its own ECDSA signature (a 176 MB reply after 23 s).
func TestBatchCap(t *testing.T) {
	e := newErrEnv(t, nil, false)
	t.Run("half a million elements", func(t *testing.T) {
		n := (guardian.DefaultMaxBodyBytes - 1) / 2 // "[" + "0," * (n-1) + "0]" fits the body cap
		body := "[" + strings.Repeat("0,", n-1) + "0]"
		if len(body) > guardian.DefaultMaxBodyBytes {
			t.Fatalf("body of %d bytes is over the cap", len(body))
		}
		start := time.Now()
		out := e.tp.send(t, []byte(body))
		took := time.Since(start)
		r := decode(t, out)
		mustError(t, r, -32600, "batch_too_long", "at most "+strconv.Itoa(guardian.MaxBatch)+" requests")
		if got := r.Error.Data["max_batch"]; got != float64(guardian.MaxBatch) {
			t.Errorf("data.max_batch = %v, want %d", got, guardian.MaxBatch)
		}
		if string(r.ID) != "null" {
			t.Errorf("id = %s, want null", r.ID)
		}
		if len(out) > 2048 {
			t.Errorf("reply is %d bytes, want one small error", len(out))
		}
		if took > 2*time.Second {
			t.Errorf("refusing the batch took %v", took)
		}
		t.Logf("%d elements (%d bytes) refused in %v with a %d-byte reply", n, len(body), took, len(out))
	})
	t.Run("one over the cap", func(t *testing.T) {
		pings := make([][]byte, guardian.MaxBatch+1)
		for i := range pings {
			pings[i] = e.a.envelope(t, guardian.MethodPing, map[string]any{}, nil)
		}
		r := decode(t, e.tp.send(t, batchOf(pings)))
		mustError(t, r, -32600, "batch_too_long", "at most")
	})
	t.Run("at the cap", func(t *testing.T) {
		pings := make([][]byte, guardian.MaxBatch)
		for i := range pings {
			pings[i] = e.a.envelope(t, guardian.MethodPing, map[string]any{"echo": strconv.Itoa(i)}, nil)
		}
		var answers []json.RawMessage
		if err := json.Unmarshal(e.tp.send(t, batchOf(pings)), &answers); err != nil {
			t.Fatalf("answer is not an array: %v", err)
		}
		if len(answers) != guardian.MaxBatch {
			t.Fatalf("%d answers for %d pings", len(answers), guardian.MaxBatch)
		}
		for i, a := range answers {
			r := decode(t, a)
			if r.decision() != "allow" {
				t.Fatalf("answer %d: %s", i, r.raw)
			}
			if echo, _ := r.Result["payload"].(map[string]any)["echo"].(string); echo != strconv.Itoa(i) {
				t.Errorf("answer %d echoes %q", i, echo)
			}
		}
	})
}

func batchOf(parts [][]byte) []byte {
	return append(append([]byte("["), bytes.Join(parts, []byte(","))...), ']')
}
