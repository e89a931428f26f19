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
// # Imports and snippets
//
// As in CoreDNS, `import PATTERN` at the start of a line splices in the
// snippet named PATTERN (a top-level block `(NAME) { ... }`) or the files
// the glob names (one * or ?; relative to the importing file), between
// server blocks or inside one. An Importer reads the files: the file
// system (DirImporter), or one directory holding a ConfigMap's keys
// (FlatImporter, for AKS's and k3s's coredns-custom). Imports nest at most
// MaxImportDepth deep and MaxImports in all; blocks nest at most
// MaxNesting deep, so a crafted file is an error, not a stack overflow.
// Every directive keeps the file and line it is written on;
// Corefile.Imports lists what each import read.
//
// # Placeholders
//
// {$NAME} and {%NAME%} (environment variables in CoreDNS), %{NAME}% (k3s
// fills them when it writes its manifest) and __PILLAR__NAME__ (the
// variables of the node-local-dns manifest) are replaced with the values
// of Vars. An {$NAME} or %{NAME}% without a value is an error; a
// __PILLAR__ variable without a value is left as it is, for the caller to
// recognise (node-local-dns fills two of them at run time).
//
// Parse returns a *SyntaxError (file, line, what is wrong) for text that
// is not a Corefile.
package corefile
