// Package ociimage builds hookline's container image as an OCI image
// layout, from scratch, with github.com/google/go-containerregistry: one
// layer holding the static binary, a non-root user (hookline, 65532) in
// /etc/passwd and /etc/group, /data for serve's --data-dir, owned by that
// user, and the public CA roots in /etc/ssl/certs/ca-certificates.crt. No
// base image, no shell, no libc: the binary is built with CGO_ENABLED=0.
//
// The CA roots are Mozilla's (the NSS trust store), as
// golang.org/x/crypto/x509roots/fallback/bundle carries them: pinned in
// go.sum and updated like any module (govulncheck names an outdated one),
// where a bundle copied from the build machine would differ from machine
// to machine. They are a file, where Go reads a Linux system's roots,
// rather than x509roots/fallback linked into the binary (used only when
// a system has no roots), so that a user adds their own CA to the image
// the usual way (a file mounted over it, or SSL_CERT_FILE), and a hookline
// outside the image uses its system's roots and nothing else. The few NSS
// roots with a "distrust after" date, which a PEM file cannot carry, are
// left out.
//
// Why not GoReleaser's dockers or ko: the first needs a Docker daemon, the
// second pulls a base image from a registry; neither is reachable where
// hookline is built and tested, and an image of one static binary needs
// neither. A layout can be pushed with any OCI tool (skopeo copy
// oci:DIR docker://…, crane push), or run after `umoci unpack`.
package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// UID and GID are the image's user, hookline (distroless' "nonroot" id).
const (
	UID  = 65532
	GID  = 65532
	Port = "8080"
)

// Build writes an OCI image layout to dir holding binary (a static
// hookline for arch, amd64 or arm64), tagged with version.
func Build(dir, binary, arch, version string) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	layerTar, err := rootfs(bin)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = arch, "linux"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()} // reproducible
	cf.Config = v1.Config{
		Entrypoint:   []string{"/hookline"},
		Cmd:          []string{"serve", "--addr", ":" + Port, "--data-dir", "/data"},
		User:         fmt.Sprintf("%d:%d", UID, GID),
		WorkingDir:   "/data",
		ExposedPorts: map[string]struct{}{Port + "/tcp": {}},
		Volumes:      map[string]struct{}{"/data": {}},
		Env:          []string{"HOOKLINE_NO_COLOR=1"},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "hookline",
			"org.opencontainers.image.version": version,
			"org.opencontainers.image.source":  "https://github.com/hookline/hookline",
		},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": version}))
}

// CABundle is where the image holds the public CA roots, PEM-encoded: the
// first file Go looks for on Linux.
const CABundle = "/etc/ssl/certs/ca-certificates.crt"

// caRoots returns the CA bundle's contents: every root of
// x509roots/fallback/bundle without a constraint, PEM-encoded.
func caRoots() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint == nil {
			pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
		}
	}
	return b.Bytes()
}

// rootfs is the image's one layer: the binary, the user, the CA roots,
// /data, /tmp.
func rootfs(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := []struct {
		name     string
		uid, gid int
		mode     int64
	}{{"etc/", 0, 0, 0o755}, {"etc/ssl/", 0, 0, 0o755}, {"etc/ssl/certs/", 0, 0, 0o755}, {"data/", UID, GID, 0o750}, {"tmp/", 0, 0, 0o1777}}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, Uid: d.uid, Gid: d.gid, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nhookline:x:%d:%d:hookline:/data:/sbin/nologin\n", UID, GID))},
		{"etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\nhookline:x:%d:\n", GID))},
		{CABundle[1:], 0o644, caRoots()},
		{"hookline", 0o755, bin},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
