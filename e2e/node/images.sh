#!/usr/bin/env bash
# Builds the images node components run in pods, as OCI archives in $KAFKETTE_CACHE/node-images, with
# umoci and no registry: pause (the sandbox image), busybox (local-path's helper pods and the node tests)
# and local-path-provisioner. Each archive's index names its image (io.containerd.image.name), which is
# what `ctr images import` tags it with. Only missing archives are built.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

archive_of() { echo "$IMAGES_DIR/$(echo "$1" | tr '/:' '__').tar"; }

# build_image NAME ROOTFS_FILLER CONFIG_ARGS...: ROOTFS_FILLER is called with the rootfs folder.
build_image() {
    local name="$1" fill="$2" archive work
    shift 2
    archive="$(archive_of "$name")"
    [ -s "$archive" ] && return 0
    work="$(mktemp -d)"
    umoci init --layout "$work/oci"
    umoci new --image "$work/oci:image"
    umoci unpack --image "$work/oci:image" "$work/bundle" >/dev/null
    "$fill" "$work/bundle/rootfs"
    umoci repack --image "$work/oci:image" "$work/bundle"
    umoci config --image "$work/oci:image" "$@"
    umoci gc --layout "$work/oci"
    python3 - "$work/oci/index.json" "$name" <<'PY'
import json, sys

path, name = sys.argv[1], sys.argv[2]
index = json.load(open(path))
for manifest in index["manifests"]:
    manifest.setdefault("annotations", {})["io.containerd.image.name"] = name
json.dump(index, open(path, "w"))
PY
    mkdir -p "$IMAGES_DIR"
    tar -C "$work/oci" -cf "$archive.tmp" .
    mv "$archive.tmp" "$archive"
    rm -rf "$work"
    echo "built $name ($(du -h "$archive" | cut -f1))"
}

fill_pause() { install -D -m 0755 "$PAUSE_BIN" "$1/pause"; }

fill_busybox() {
    local rootfs="$1" applet
    install -D -m 0755 /bin/busybox "$rootfs/bin/busybox"
    for applet in $(/bin/busybox --list); do
        [ -e "$rootfs/bin/$applet" ] || ln -s busybox "$rootfs/bin/$applet"
    done
    mkdir -p "$rootfs/etc" "$rootfs/tmp" "$rootfs/root"
    chmod 1777 "$rootfs/tmp"
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$rootfs/etc/passwd"
    printf 'root:x:0:\nnobody:x:65534:\n' >"$rootfs/etc/group"
}

fill_local_path() {
    install -D -m 0755 "$LOCAL_PATH_BIN" "$1/usr/bin/local-path-provisioner"
    mkdir -p "$1/tmp"
    chmod 1777 "$1/tmp"
}

build_image "$PAUSE_IMAGE" fill_pause --config.entrypoint /pause --config.user 65535:65535
build_image "$BUSYBOX_IMAGE" fill_busybox --config.cmd sh --config.env PATH=/bin
build_image "$LOCAL_PATH_IMAGE" fill_local_path --config.entrypoint /usr/bin/local-path-provisioner
