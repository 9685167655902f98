package session

import (
	"encoding/json"
	"fmt"
)

// PageLimits bound one page of a paged report. A zero limit is no limit.
type PageLimits struct {
	// MaxItems is the most items on one page.
	MaxItems int
	// MaxBytes is the most bytes the page's items take as a JSON array
	// ("[" item "," item … "]"); the wire layer sets it to its frame cap
	// minus the frame's other fields.
	MaxBytes int
}

// Paginate splits items into consecutive pages within lim, keeping their
// order. It always returns at least one page, so an empty list still makes
// one (empty, non-nil) page: a full report of no sessions must still be
// sent, or the other side never drops its ghosts. An item that alone exceeds
// MaxBytes is an ErrItemTooLarge naming its index.
func Paginate[T any](items []T, lim PageLimits) ([][]T, error) {
	pages := [][]T{}
	cur := []T{}
	size := 2 // "[]"
	for i, it := range items {
		n := 0
		if lim.MaxBytes > 0 {
			b, err := json.Marshal(it)
			if err != nil {
				return nil, fmt.Errorf("session: encoding item %d: %w", i, err)
			}
			n = len(b)
			if 2+n > lim.MaxBytes {
				return nil, fmt.Errorf("%w: item %d encodes to %d bytes, a page holds %d", ErrItemTooLarge, i, n, lim.MaxBytes)
			}
		}
		sep := 0
		if len(cur) > 0 {
			sep = 1 // ","
		}
		full := lim.MaxItems > 0 && len(cur) == lim.MaxItems ||
			lim.MaxBytes > 0 && size+sep+n > lim.MaxBytes
		if full {
			pages = append(pages, cur)
			cur, size, sep = []T{}, 2, 0
		}
		cur = append(cur, it)
		size += sep + n
	}
	return append(pages, cur), nil
}
