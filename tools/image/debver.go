package main

import "strings"

// compareDebVersions orders two Debian version strings as dpkg
// --compare-versions does (deb-version(7)): epoch, then upstream version,
// then revision, each compared by verrevcmp. It returns <0, 0 or >0.
func compareDebVersions(a, b string) int {
	ea, ua, ra := splitDebVersion(a)
	eb, ub, rb := splitDebVersion(b)
	if c := verrevcmp(ea, eb); c != 0 {
		return c
	}
	if c := verrevcmp(ua, ub); c != 0 {
		return c
	}
	return verrevcmp(ra, rb)
}

// splitDebVersion splits [epoch:]upstream[-revision]; a missing epoch is
// "0" and a missing revision "".
func splitDebVersion(v string) (epoch, upstream, revision string) {
	epoch = "0"
	if i := strings.IndexByte(v, ':'); i >= 0 {
		epoch, v = v[:i], v[i+1:]
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		return epoch, v[:i], v[i+1:]
	}
	return epoch, v, ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// order is dpkg's weight of one character of a non-digit run: the end of
// the string and digits 0, letters their code, '~' below everything, any
// other character after the letters.
func order(s string, i int) int {
	switch {
	case i >= len(s) || isDigit(s[i]):
		return 0
	case s[i] >= 'a' && s[i] <= 'z', s[i] >= 'A' && s[i] <= 'Z':
		return int(s[i])
	case s[i] == '~':
		return -1
	default:
		return int(s[i]) + 256
	}
}

// verrevcmp is dpkg's comparison of one part: alternating runs of
// non-digits (compared by order) and digits (compared as numbers).
func verrevcmp(a, b string) int {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		for (i < len(a) && !isDigit(a[i])) || (j < len(b) && !isDigit(b[j])) {
			if c := order(a, i) - order(b, j); c != 0 {
				return c
			}
			i++
			j++
		}
		for i < len(a) && a[i] == '0' {
			i++
		}
		for j < len(b) && b[j] == '0' {
			j++
		}
		firstDiff := 0
		for i < len(a) && isDigit(a[i]) && j < len(b) && isDigit(b[j]) {
			if firstDiff == 0 {
				firstDiff = int(a[i]) - int(b[j])
			}
			i++
			j++
		}
		if i < len(a) && isDigit(a[i]) {
			return 1
		}
		if j < len(b) && isDigit(b[j]) {
			return -1
		}
		if firstDiff != 0 {
			return firstDiff
		}
	}
	return 0
}
