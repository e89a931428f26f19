// Package helmchart holds the tests of the Helm chart deploy/helm/nodecache:
// rendered with Helm's own Go SDK, the chart must produce, with its default
// values, the objects that `kubectl apply -k deploy/base` creates (Helm's own
// labels aside), and with podAccess, nftOnly and interceptKubeDNS the objects
// of the overlays of the same names; deploy/base is rendered with
// Kustomize's krusty, the library inside `kubectl kustomize`.
//
// A module of its own, so that the agent's module does not depend on Helm:
// `make unit` runs it (`cd tools/helmchart && go test ./...`).
package helmchart
