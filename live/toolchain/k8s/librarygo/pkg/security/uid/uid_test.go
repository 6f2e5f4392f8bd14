package uid

import "testing"

func TestParseBlock(t *testing.T) {
	good := map[string]Block{
		// What the namespace security allocation controller writes (START/SIZE), from its default range
		// 1000000000-1999999999/10000: the first block, a typical project's, the last.
		"1000000000/10000": {Start: 1000000000, End: 1000009999},
		"1000680000/10000": {Start: 1000680000, End: 1000689999},
		"1999990000/10000": {Start: 1999990000, End: 1999999999},
		// The same block as START-END, both ends included.
		"1000680000-1000689999": {Start: 1000680000, End: 1000689999},
		// apiserver-library-go's own cases for supplemental groups (sccmatching's matcher_test.go).
		"1/5":   {Start: 1, End: 5},
		"6/5":   {Start: 6, End: 10},
		"1-5":   {Start: 1, End: 5},
		"11-15": {Start: 11, End: 15},
		// One id; the largest ids.
		"0/1":                   {Start: 0, End: 0},
		"7-7":                   {Start: 7, End: 7},
		"4294967295/1":          {Start: 4294967295, End: 4294967295},
		"4294967290-4294967295": {Start: 4294967290, End: 4294967295},
	}
	for in, want := range good {
		got, err := ParseBlock(in)
		if err != nil || got != want {
			t.Errorf("ParseBlock(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	bad := []string{
		"", "1000680000", "abc", "/10000", "1000680000/", "-5", "5-", "1/0", "10-5",
		"1000680000/10000x", " 1/5", "1/ 5", "+1/5", "1/-5", "1.5/2", "4294967296/1", "4294967295/2",
		"1/5,6/5", // a list is the caller's to split (sccmatching splits supplemental groups on ",")
		"1/5/6", "1-5-6",
	}
	for _, in := range bad {
		if got, err := ParseBlock(in); err == nil {
			t.Errorf("ParseBlock(%q) = %+v, want an error", in, got)
		}
	}
}

func TestBlockString(t *testing.T) {
	// What the controller writes is what ParseBlock reads back.
	for _, in := range []string{"1000680000/10000", "1/5", "0/1"} {
		b, err := ParseBlock(in)
		if err != nil || b.String() != in {
			t.Errorf("ParseBlock(%q).String() = %q (%v)", in, b.String(), err)
		}
	}
	if b, _ := ParseBlock("1000680000-1000689999"); b.Size() != 10000 || b.String() != "1000680000/10000" {
		t.Errorf("1000680000-1000689999: size %d, %s", b.Size(), b)
	}
}
