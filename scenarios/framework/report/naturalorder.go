package report

import "strings"

// CompareIDs orders scenario IDs the way a person reads the catalog: letters
// compare as text and digit runs as numbers, so A1 < A2 < A10 < C1. It returns
// a negative number, zero or a positive number like strings.Compare, and is
// usable with slices.SortFunc.
func CompareIDs(a, b string) int {
	x, y := a, b
	for x != "" && y != "" {
		xd, yd := isDigit(x[0]), isDigit(y[0])
		if xd != yd {
			// A digit run sorts before a letter run, as in ASCII.
			if xd {
				return -1
			}
			return 1
		}
		xr, xrest := splitRun(x, xd)
		yr, yrest := splitRun(y, yd)
		var c int
		if xd {
			c = compareNumbers(xr, yr)
		} else {
			c = strings.Compare(xr, yr)
		}
		if c != 0 {
			return c
		}
		x, y = xrest, yrest
	}
	switch {
	case x == "" && y != "":
		return -1
	case x != "" && y == "":
		return 1
	}
	// Equal as numbers but spelled differently ("A01" vs "A1"): fall back to
	// text so the order is still total and deterministic.
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// splitRun returns the leading run of digits (or non-digits) and the rest.
func splitRun(s string, digits bool) (run, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) == digits {
		i++
	}
	return s[:i], s[i:]
}

// compareNumbers compares two digit strings of any length numerically,
// without parsing, so long runs cannot overflow.
func compareNumbers(a, b string) int {
	a = strings.TrimLeft(a, "0")
	b = strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}
