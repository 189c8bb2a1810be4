// Command ociimage builds edgelb's OCI image without a container daemon
// (go-containerregistry): one layer holding the static binary as /edgelb,
// nothing else (no shell, no libc, no package manager), and then reads the
// written image back and checks it.
//
//	ociimage build -binary bin/edgelb -out bin/image -tag edgelb:dev
//	ociimage inspect bin/image
//
// build writes an OCI image layout directory (push it with `crane push` or
// `skopeo copy oci:bin/image docker://…`) and bin/image.tar (docker/ctr load).
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonRoot is distroless's "nonroot" user. The image defaults to it: `edgelb
// check`, `version` and the REST client need no privilege. The DaemonSet
// (lb/k8s/deploy) sets runAsUser 0 with only NET_ADMIN/NET_RAW, because
// Kubernetes grants added capabilities to a non-root process only through
// file capabilities on the binary.
const nonRoot = "65532:65532"

var errCheck = errors.New("image check failed")

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ociimage build|inspect ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "inspect":
		if len(os.Args) != 3 {
			err = errors.New("usage: ociimage inspect LAYOUT_DIR")
		} else {
			err = inspect(os.Args[2])
		}
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	bin := fs.String("binary", "bin/edgelb", "the static edgelb binary")
	out := fs.String("out", "bin/image", "OCI layout directory to write (replaced)")
	tag := fs.String("tag", "edgelb:dev", "image reference recorded in the layout and the tarball")
	version := fs.String("version", "dev", "org.opencontainers.image.version")
	epoch := fs.Int64("created", 0, "creation time, Unix seconds (e.g. the commit time, for reproducible digests)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		return fmt.Errorf("-tag %q: %w", *tag, err)
	}
	if err := checkStatic(*bin); err != nil {
		return err
	}
	data, err := os.ReadFile(*bin)
	if err != nil {
		return err
	}
	created := time.Unix(*epoch, 0).UTC()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "edgelb", Mode: 0o755, Size: int64(len(data)), ModTime: created, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = []string{"/edgelb"}
	cf.Config.Cmd = []string{"run", "--config", "/etc/edgelb/config.yaml"}
	cf.Config.User = nonRoot
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "edgelb",
		"org.opencontainers.image.source":  "https://github.com/edgelb/edgelb",
		"org.opencontainers.image.version": *version,
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	if img, err = mutate.CreatedAt(img, v1.Time{Time: created}); err != nil {
		return err
	}
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	p, err := layout.Write(*out, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.String()})); err != nil {
		return err
	}
	if err := tarball.WriteToFile(filepath.Clean(*out)+".tar", ref, img); err != nil {
		return err
	}
	return inspect(*out)
}

// inspect reads the layout back and prints and checks what a runtime uses.
func inspect(dir string) error {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(im.Manifests) != 1 {
		return fmt.Errorf("%w: %s holds %d images, want 1", errCheck, dir, len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	var files []string
	var total int64
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			files = append(files, fmt.Sprintf("%s %o %d:%d %d", h.Name, h.Mode, h.Uid, h.Gid, h.Size))
			total += h.Size
		}
		rc.Close()
	}
	size, _ := img.Size()
	cfg, _ := json.Marshal(map[string]any{"User": cf.Config.User, "Entrypoint": cf.Config.Entrypoint, "Cmd": cf.Config.Cmd,
		"WorkingDir": cf.Config.WorkingDir, "Labels": cf.Config.Labels, "os/arch": cf.OS + "/" + cf.Architecture})
	fmt.Printf("image %s (%s)\n  digest %s, manifest %d bytes, %d layer(s), %d bytes of files\n  config %s\n",
		dir, im.Manifests[0].Annotations["org.opencontainers.image.ref.name"], im.Manifests[0].Digest, size, len(layers), total, cfg)
	for _, f := range files {
		fmt.Printf("  file %s\n", f)
	}
	uid, _, _ := bytes.Cut([]byte(cf.Config.User), []byte(":"))
	if n, err := strconv.Atoi(string(uid)); err != nil || n == 0 {
		return fmt.Errorf("%w: user %q is not a numeric non-root UID", errCheck, cf.Config.User)
	}
	if len(files) != 1 || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/edgelb" {
		return fmt.Errorf("%w: want only /edgelb as file and entrypoint, have %v and %v", errCheck, files, cf.Config.Entrypoint)
	}
	fmt.Println("  MEASURED image: 1 file (the static binary), non-root user, entrypoint /edgelb")
	return nil
}

// checkStatic refuses a dynamically linked binary: the image has no libc.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("-binary %q: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("-binary %q: dynamically linked (has an ELF interpreter); build with CGO_ENABLED=0", path)
		}
	}
	return nil
}
