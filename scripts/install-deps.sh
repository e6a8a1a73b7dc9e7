#!/usr/bin/env bash
# Installs (apt, Debian 12) whatever sqar needs to build, test and benchmark that is missing.
set -euo pipefail
PACKAGES=(
  build-essential cmake ninja-build pkg-config python3
  libsquashfs-dev libzstd-dev libxxhash-dev zlib1g-dev libdeflate-dev liblzma-dev liblz4-dev liblzo2-dev
  libfuse3-dev fuse3 libgtest-dev libarchive-dev
  # independent readers the tests compare against, and the peers the benchmark runs
  squashfs-tools squashfs-tools-ng squashfuse erofs-utils zstd pigz attr
  # the decoders that read extract --tar's compressed archives back
  gzip xz-utils bzip2 lz4
  # bsdtar: the second independent tar reader extract --tar is checked against
  libarchive-tools
  # what the tests call that a minimal Debian may lack: pgrep and sysctl, mount/losetup, and
  # modprobe (the kernel runs it to load squashfs or fuse when they are modules)
  procps mount kmod
  # the extract race test checks the modes extract creates directories with
  strace
  # a FUSE filesystem without O_TMPFILE: the interrupt tests exercise sqar's named temporary image
  bindfs
  # the man page test renders man/*.1 and man/*.8
  groff-base man-db
  # fuzzing and sanitizers
  clang libclang-rt-14-dev
  # the style check (scripts/format.sh) pins clang-format 14
  clang-format-14
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Another apt (unattended-upgrades at boot, a second set-up script) may hold the dpkg lock:
  # wait for it rather than fail on a fresh machine.
  lock_wait=(-o DPkg::Lock::Timeout=900)
  apt-get "${lock_wait[@]}" update -qq
  apt-get "${lock_wait[@]}" install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fi
