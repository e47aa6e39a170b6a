#!/usr/bin/env bash
# Builds, once, a local stand-in for Lambda's provided.al2023 base image and prints its name
# (`sam local invoke --invoke-image <name> --skip-pull-image`); nothing comes from a registry.
#   tests/rig/sam_image.sh             the base image (real AWS, your credentials)
#   tests/rig/sam_image.sh --loopback  the same with the AWS SDKs pointed at a moto that
#                                      tests/rig/sam_netns.py serves inside the container on
#                                      127.0.0.1:4566 (SAM passes only the variables the
#                                      template declares, so the endpoint comes from the image)
# DOCKER_HOST names the engine (default: the system's socket; tests/rig/docker.sh start gives
# a private one).
#
# The image holds what SAM and a Rust function need: /bin/sh, mv and chmod (SAM's invoke-image
# Dockerfile runs `mv … && chmod +x …` on it), glibc and libgcc_s from this machine, the CA
# bundle (rustls-native-certs), and al2023's empty /var/task, /var/runtime, /opt. The machine's
# glibc (Debian 12: 2.36) is newer than al2023's (2.34): the SAM tests check that no bootstrap
# needs a symbol newer than 2.34, which this image alone would not catch. x86_64 only: the
# arm64 build would need an emulator this machine does not have.
set -euo pipefail
variant=base
changes=(--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change 'ENV LANG=C.UTF-8')
case "${1:-}" in
  "") ;;
  --loopback)
    variant=loopback
    changes+=(--change 'ENV AWS_ENDPOINT_URL=http://127.0.0.1:4566'
              --change 'ENV AWS_ALLOW_HTTP=true'
              --change 'ENV AWS_EC2_METADATA_DISABLED=true') ;;
  *) echo "usage: $0 [--loopback]" >&2; exit 2 ;;
esac
[ "$(uname -m)" = x86_64 ] || { echo "error: the local Lambda image is built for x86_64 only (this machine: $(uname -m))" >&2; exit 1; }
export DOCKER_HOST="${DOCKER_HOST:-unix:///var/run/docker.sock}"

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,lib/x86_64-linux-gnu,lib64,tmp,var/task,var/runtime,var/lang/lib,opt,etc/ssl/certs}
chmod 1777 "$root/tmp"
for tool in dash mv chmod cp rm cat ls mkdir; do
  cp -L "$(command -v "$tool")" "$root/bin/"
done
ln -s dash "$root/bin/sh"
mkdir -p "$root/usr"
ln -s ../bin "$root/usr/bin"
libs="$(for tool in "$root"/bin/*; do ldd "$tool" 2>/dev/null || true; done | awk '$3 ~ /^\// {print $3}' | sort -u)"
for lib in $libs /lib/x86_64-linux-gnu/{libc.so.6,libm.so.6,libgcc_s.so.1,libpthread.so.0,libdl.so.2,librt.so.1,ld-linux-x86-64.so.2}; do
  cp -L "$lib" "$root/lib/x86_64-linux-gnu/"
done
ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$root/lib64/ld-linux-x86-64.so.2"
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
echo /lib/x86_64-linux-gnu >"$root/etc/ld.so.conf"
ldconfig -r "$root"
find "$root" -exec touch -h -d @0 {} +

# The name carries a hash of the content: SAM reuses `<name>:rapid-x86_64` without looking at
# the base again, so a changed base must have a new name.
key="$( (tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$root" -c . | sha256sum; \
         printf '%s\n' "${changes[@]}") | sha256sum | cut -c1-12)"
image="lakemirror-sam-$variant-$key:latest"
if ! docker image inspect "$image" >/dev/null 2>&1; then
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$root" -c . \
    | docker import "${changes[@]}" - "$image" >/dev/null
  echo "built the local Lambda base image $image" >&2
fi
echo "$image"
