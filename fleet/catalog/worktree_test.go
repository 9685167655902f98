package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"example.com/pifleet/fleet/controlapi"
)

// deliveringFleet records deliveries; conflict makes them fail.
type deliveringFleet struct {
	fakeFleet
	delivered []controlapi.DeliverRequest
	conflict  bool
}

func (f *deliveringFleet) Deliver(_ context.Context, _ string, req controlapi.DeliverRequest) (controlapi.Delivery, error) {
	if f.conflict {
		return controlapi.Delivery{}, &controlapi.Error{Code: controlapi.CodeDeliveryFailed, Detail: "merge_conflict", Message: "conflicts in f.txt"}
	}
	f.delivered = append(f.delivered, req)
	return controlapi.Delivery{Mode: req.Mode, Branch: "pifleet/t-1-fix", Commit: "0123456789abcdef", Target: "main"}, nil
}

// remote_accept with deliver: delivered first, then accepted; a failed
// delivery does not accept.
func TestAcceptDelivers(t *testing.T) {
	f := &deliveringFleet{fakeFleet: fakeFleet{tasks: []controlapi.Task{{ID: "t-1", InstanceID: "i-1", State: "awaiting_review"}}}}
	c := New(f)
	res, err := c.Call(context.Background(), "remote_accept", json.RawMessage(`{"taskId":"t-1","deliver":"merge","target":"main"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	if len(f.delivered) != 1 || f.delivered[0].Mode != "merge" || f.delivered[0].Target != "main" || f.accepted.Load() != 1 ||
		!strings.Contains(string(b), "merged into main") {
		t.Errorf("delivered %+v accepted %d result %s", f.delivered, f.accepted.Load(), b)
	}
	f.conflict = true
	if _, err := c.Call(context.Background(), "remote_accept", json.RawMessage(`{"taskId":"t-1","deliver":"merge"}`), nil); !errors.Is(err, controlapi.ErrDeliveryFailed) {
		t.Errorf("conflict: %v", err)
	}
	if f.accepted.Load() != 1 {
		t.Error("accepted after a failed delivery")
	}
}
