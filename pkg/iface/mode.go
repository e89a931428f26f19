package iface

import (
	"bufio"
	"strings"
)

// saveStats summarises the output of iptables-save (and ip6tables-save) of one flavour.
type saveStats struct {
	rules      int  // lines that are rules ("-A ...")
	kubeChains bool // a chain named KUBE-* exists (kube-proxy or kubelet uses this flavour)
}

func parseSave(out string) saveStats {
	var s saveStats
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "-"):
			s.rules++
		case strings.HasPrefix(line, ":KUBE-"):
			s.kubeChains = true
		}
	}
	return s
}

// chooseMode is kube-proxy's iptables-wrapper heuristic: nft when the nft tables hold kube-proxy's
// (or kubelet's) KUBE- chains; otherwise legacy when legacy holds more rules than nft (in particular
// when only legacy has rules); otherwise nft.
func chooseMode(legacySave, nftSave string) IPTablesMode {
	legacy, nft := parseSave(legacySave), parseSave(nftSave)
	switch {
	case nft.kubeChains:
		return ModeNFT
	case legacy.rules > nft.rules:
		return ModeLegacy
	default:
		return ModeNFT
	}
}
