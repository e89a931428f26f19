package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// imageIndex opens the multi-arch index a layout build wrote (index.json's
// one entry).
func imageIndex(dir string) (v1.ImageIndex, error) {
	outer, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s/index.json has %d entries, want the one image index build writes", dir, len(m.Manifests))
	}
	return outer.ImageIndex(m.Manifests[0].Digest)
}

// push uploads the layout's index and every image in it to ref, with the
// credentials docker login or a credential helper left (~/.docker/config.json).
func push(ctx context.Context, dir, ref string, log *slog.Logger) error {
	if ref == "" {
		return errors.New("push: -ref REGISTRY/REPOSITORY:TAG is required")
	}
	tag, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	idx, err := imageIndex(dir)
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	log.Info("pushed", "ref", ref, "digest", d.String())
	return nil
}

// printDigests prints the index's digest and each platform's manifest.
func printDigests(dir string) error {
	idx, err := imageIndex(dir)
	if err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("index %s\n", d)
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, desc := range m.Manifests {
		fmt.Printf("%s %s\n", desc.Platform, desc.Digest)
	}
	return nil
}
