// Package corefile reads a CoreDNS Corefile: the text of the coredns or
// node-local-dns ConfigMap. It does not run anything; it turns the text
// into server blocks and directives that `nodecache migrate` translates.
//
// # Syntax
//
// A Corefile is a list of server blocks:
//
//	ZONE[:PORT] [ZONE[:PORT]...] {
//	    DIRECTIVE ARG... [{
//	        OPTION ARG...
//	    }]
//	}
//
// Tokens are split on white space; "double quotes" keep spaces (with \"
// for a quote); # starts a comment that runs to the end of the line; a
// directive ends at the end of its line unless a { opens its block. A
// file with a single server block may leave out the braces.
//
// # Placeholders
//
// {$NAME} and {%NAME%} (environment variables in CoreDNS) and
// __PILLAR__NAME__ (the variables of the node-local-dns manifest) are
// replaced with the values of Vars. An {$NAME} without a value is an
// error; a __PILLAR__ variable without a value is left as it is, for the
// caller to recognise (node-local-dns fills two of them at run time).
//
// Parse returns a *SyntaxError (file, line, what is wrong) for text that
// is not a Corefile.
package corefile
