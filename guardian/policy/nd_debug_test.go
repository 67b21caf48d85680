package policy

import (
	"context"
	"fmt"
	"testing"
)

func TestNDDebug(t *testing.T) {
	e, _ := New(context.Background(), ndBundle, newMemRecorder(), nil)
	d, _ := e.Decide(context.Background(), toolCall(t, "bash", "ls"))
	fmt.Println(string(d.NDBuiltinCache))
}
