package k8s

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestControllerConditions (issue 37): the leader keeps the Service status
// condition edgelb.io/AddressAssigned — True with the addresses, False
// (Pending, with the reason) while none is free, and True again once one
// frees; a Service whose request cannot be read shows why.
func TestControllerConditions(t *testing.T) {
	_, cs, _, ctx := leadingFake(t, nil, poolObj("small", 0, "192.0.2.0/30"))
	for i := 0; i < 5; i++ {
		if _, err := cs.CoreV1().Services("default").Create(ctx, lbService(fmt.Sprintf("s%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cond := func(name string) *metav1.Condition {
		s, err := cs.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return meta.FindStatusCondition(s.Status.Conditions, ConditionAddress)
	}
	var pending string
	waitFor(t, 30*time.Second, "4 True, 1 False", func() bool {
		nt, nf := 0, 0
		for i := 0; i < 5; i++ {
			c := cond(fmt.Sprintf("s%d", i))
			switch {
			case c == nil:
			case c.Status == metav1.ConditionTrue && c.Reason == ReasonCondAssigned && strings.HasPrefix(c.Message, "assigned [192.0.2."):
				nt++
			case c.Status == metav1.ConditionFalse && c.Reason == ReasonCondPending && strings.Contains(c.Message, "no address available"):
				nf++
				pending = fmt.Sprintf("s%d", i)
			}
		}
		return nt == 4 && nf == 1
	})
	t.Logf("pending %s: %+v", pending, *cond(pending))
	victim := "s0"
	if pending == "s0" {
		victim = "s1"
	}
	if err := cs.CoreV1().Services("default").Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "pending Service's condition True", func() bool {
		c := cond(pending)
		return c != nil && c.Status == metav1.ConditionTrue
	})

	bad := lbService("bad")
	bad.Annotations = map[string]string{"edgelb.io/loadBalancerIPs": "not-an-ip"}
	if _, err := cs.CoreV1().Services("default").Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "unreadable request shown", func() bool {
		c := cond("bad")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ReasonCondInvalid && strings.Contains(c.Message, "not-an-ip")
	})
	t.Logf("bad: %+v", *cond("bad"))
}
