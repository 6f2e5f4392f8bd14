// Package uid reads the blocks of ids OpenShift's namespace security allocation controller writes on every
// project (openshift.io/sa.scc.uid-range, openshift.io/sa.scc.supplemental-groups), as SCC admission reads them.
//
// Written for the live tier: github.com/openshift/library-go is not served by the module proxy. Only what
// apiserver-library-go's sccmatching calls is here: Block{Start, End} and ParseBlock. The formats are those the
// callers and OpenShift's documentation give: "START/SIZE" (what the controller writes, e.g. "1000680000/10000":
// ids 1000680000 to 1000689999) and "START-END" (both ends included, e.g. "1000680000-1000689999").
package uid

import (
	"fmt"
	"strconv"
	"strings"
)

// Block is a range of ids, both ends included.
type Block struct {
	Start uint32
	End   uint32
}

// Size is the number of ids in the block.
func (b Block) Size() uint32 {
	return b.End - b.Start + 1
}

// String is the block as the allocation controller writes it: START/SIZE.
func (b Block) String() string {
	return fmt.Sprintf("%d/%d", b.Start, b.Size())
}

// ParseBlock reads "START/SIZE" or "START-END". A block is never empty and never wraps past the largest id.
func ParseBlock(in string) (Block, error) {
	if first, size, ok := strings.Cut(in, "/"); ok {
		start, err := number(first, in)
		if err != nil {
			return Block{}, err
		}
		n, err := number(size, in)
		if err != nil {
			return Block{}, err
		}
		if n == 0 {
			return Block{}, fmt.Errorf("block %q: a block of size 0 holds no id", in)
		}
		end := uint64(start) + uint64(n) - 1
		if end > 1<<32-1 {
			return Block{}, fmt.Errorf("block %q: ends past the largest id %d", in, uint32(1<<32-1))
		}
		return Block{Start: start, End: uint32(end)}, nil
	}
	if first, last, ok := strings.Cut(in, "-"); ok {
		start, err := number(first, in)
		if err != nil {
			return Block{}, err
		}
		end, err := number(last, in)
		if err != nil {
			return Block{}, err
		}
		if end < start {
			return Block{}, fmt.Errorf("block %q: ends before it starts", in)
		}
		return Block{Start: start, End: end}, nil
	}
	return Block{}, fmt.Errorf("block %q is not in the format \"<start>/<size>\" or \"<start>-<end>\"", in)
}

// number is one unsigned 32-bit decimal: no sign, no space, nothing after it.
func number(s, in string) (uint32, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("block %q: %q is not a number", in, s)
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("block %q: %q is out of range", in, s)
	}
	return uint32(n), nil
}
