package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestPaginate(t *testing.T) {
	var items []SessionInfo
	for i := range 25 {
		items = append(items, SessionInfo{SessionID: fmt.Sprint(i), Path: "/s/" + strings.Repeat("x", i), Kind: KindScratch})
	}
	for _, lim := range []PageLimits{{}, {MaxItems: 10}, {MaxBytes: 600}, {MaxItems: 4, MaxBytes: 400}, {MaxItems: 1}} {
		pages, err := Paginate(items, lim)
		if err != nil {
			t.Fatalf("%+v: %v", lim, err)
		}
		var joined []SessionInfo
		for i, p := range pages {
			b, _ := json.Marshal(p)
			if lim.MaxBytes > 0 && len(b) > lim.MaxBytes {
				t.Errorf("%+v: page %d encodes to %d bytes", lim, i, len(b))
			}
			if lim.MaxItems > 0 && len(p) > lim.MaxItems {
				t.Errorf("%+v: page %d holds %d items", lim, i, len(p))
			}
			if len(p) == 0 {
				t.Errorf("%+v: empty page %d", lim, i)
			}
			// Pages are full: the next item would not have fit.
			if i+1 < len(pages) {
				more, _ := json.Marshal(append(append([]SessionInfo{}, p...), pages[i+1][0]))
				if (lim.MaxItems == 0 || len(p) < lim.MaxItems) && (lim.MaxBytes == 0 || len(more) <= lim.MaxBytes) {
					t.Errorf("%+v: page %d closed early", lim, i)
				}
			}
			joined = append(joined, p...)
		}
		if fmt.Sprint(joined) != fmt.Sprint(items) {
			t.Errorf("%+v: pages do not rejoin to the list", lim)
		}
	}
}

func TestPaginateEdges(t *testing.T) {
	pages, err := Paginate([]SessionInfo(nil), PageLimits{MaxItems: 5})
	if err != nil || len(pages) != 1 || pages[0] == nil {
		t.Fatalf("empty list: %#v, %v; want one empty, non-nil page", pages, err)
	}
	if b, _ := json.Marshal(pages[0]); string(b) != "[]" {
		t.Errorf("empty page encodes as %s", b)
	}
	_, err = Paginate([]string{"short", strings.Repeat("y", 100)}, PageLimits{MaxBytes: 50})
	if !errors.Is(err, ErrItemTooLarge) || !strings.Contains(err.Error(), "item 1") {
		t.Errorf("oversized item: %v", err)
	}
}
