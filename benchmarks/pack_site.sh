#!/bin/bash
# Pack the TIRx / tvm-ffi wheels' installed tree as one xz tarball for a device call: the device tool carries at most
# 64 MiB with the working tree (about 16 MB tracked), and the two wheels are 49 MB zip-deflated; installed and packed
# with xz they are 33 MB, which leaves room for the FlashInfer carry or older package trees beside them. Run here, from
# the repository root (the wheels in .sm90tree/whl, else from PyPI); carry .sm90tree/sitepack. benchmarks/
# gpu_stop45.sh unpacks it into /tmp/site where it is present, else installs $WHEELS as before.
#
#   bash benchmarks/pack_site.sh            # .sm90tree/whl -> .sm90tree/sitepack/site.tar.xz (about 80 s, 2 cores)
set -euo pipefail
WHEELS=${WHEELS:-.sm90tree/whl}
PLATFORM=(--python-version 3.12 --only-binary=:all: --platform manylinux_2_28_x86_64)
if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then  # from PyPI: the pinned TIRx and the tvm-ffi it was built with
  python3 -m pip download -q --no-deps "${PLATFORM[@]}" -d "$WHEELS" apache-tvm-tirx==0.1.0a4 apache-tvm-ffi==0.1.15.post2
fi
tmp=$(mktemp -d)
# the device's Python is 3.12 (the tvm-ffi wheel is cp312): install for it, whatever this machine's Python is
python3 -m pip install -q --no-index --no-deps --no-compile "${PLATFORM[@]}" --target "$tmp" "$WHEELS"/*.whl
mkdir -p .sm90tree/sitepack
tar -C "$tmp" -cf - . | xz -T0 -9 > .sm90tree/sitepack/site.tar.xz
rm -rf "$tmp"
du -b .sm90tree/sitepack/site.tar.xz
