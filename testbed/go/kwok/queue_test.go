// The fix testbed/build.py applies to kwok's delay queues (KWOK_HEAP_FIX), run before kwok is
// built: without it both tests fail (the second hangs until its deadline).
package kwokbins

import (
	"testing"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/kwok/pkg/utils/heap"
	"sigs.k8s.io/kwok/pkg/utils/queue"
)

func TestAnItemPushedTwiceIsOneEntryDueAtTheEarlierTime(t *testing.T) {
	h := heap.NewHeap[int64, string]()
	h.Push(2, "node-a")
	h.Push(1, "node-a")
	h.Push(5, "node-a")
	h.Push(3, "node-b")
	if h.Len() != 2 {
		t.Fatalf("%d entries for two items", h.Len())
	}
	if k, v, _ := h.Peek(); v != "node-a" || k != 1 {
		t.Fatalf("top is %s at %d, want node-a at 1", v, k)
	}
	if !h.Remove("node-a") {
		t.Fatal("node-a could not be removed")
	}
	if k, v, ok := h.Peek(); !ok || v != "node-b" || k != 3 || h.Len() != 1 {
		t.Fatalf("after removing node-a: top %s at %d (%v), %d entries", v, k, ok, h.Len())
	}
}

// The lease controller's sequence: a node's renewal is queued twice (let go and held again while
// a renewal was in flight), then the node is deleted (its item cancelled). Every other node's
// renewal must still come out.
func TestACancelledDuplicateBlocksNoOtherItem(t *testing.T) {
	q := queue.NewWeightDelayingQueue[string](clock.RealClock{})
	q.AddWeightAfter("lost-node", 2, 10*time.Millisecond)
	q.AddWeightAfter("lost-node", 2, 20*time.Millisecond)
	q.Cancel("lost-node")
	q.AddWeightAfter("other-node", 2, 30*time.Millisecond)
	done := make(chan struct{})
	timer := time.AfterFunc(5*time.Second, func() { close(done) })
	defer timer.Stop()
	got, ok := q.GetOrWaitWithDone(done)
	if !ok || got != "other-node" {
		t.Fatalf("got %q (%v) within 5 s, want other-node", got, ok)
	}
}
