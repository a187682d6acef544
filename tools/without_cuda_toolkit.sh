#!/usr/bin/env bash
# Run a command as on a machine without the CUDA toolkit: the book's reader profile (a), a Linux
# laptop with a CPU build of torch and no nvcc (book/setup.md, "Where the book runs").
#
#     tools/without_cuda_toolkit.sh COMMAND [ARG...]        (make test-oldest runs through it)
#
# Hiding nvcc from PATH is not enough: torch.utils.cpp_extension falls back to /usr/local/cuda, and
# the SIMT emulator looks for CUDA's headers there too. So the command runs in a private mount
# namespace (unshare --mount) in which /usr/local/cuda* do not exist, /opt/cuda is an empty
# read-only tmpfs, and every nvcc on PATH is /dev/null (not executable), with CUDA_HOME,
# CUDA_PATH and CUDA_ROOT unset. Only the command's processes see that: the rest of the machine
# (make test and make check-cuda, running beside it in CI) keeps the toolkit. Before running the
# command the script checks that nvcc and the toolkit's headers are really gone, and fails if not.
#
# Where there is nothing to hide, the command runs as it is. Where there is, and a mount namespace
# is not permitted (not root, and no user namespaces), the script stops with a message.
set -euo pipefail

toolkit_dirs() {
  local dir
  for dir in /usr/local/cuda* /opt/cuda; do
    # /usr/local/cuda is usually a link to /usr/local/cuda-X.Y: hiding its target hides it.
    if [ -d "$dir" ] && [ ! -L "$dir" ]; then echo "$dir"; fi
  done
}

path_nvccs() {
  local dir
  local IFS=:
  for dir in $PATH; do
    if [ -n "$dir" ] && [ -e "$dir/nvcc" ]; then echo "$dir/nvcc"; fi
  done
}

if [ "$#" = 0 ]; then
  echo "usage: $0 COMMAND [ARG...]" >&2
  exit 2
fi

if [ "$1" != --inside-namespace ]; then
  if [ -z "$(toolkit_dirs)$(path_nvccs)${CUDA_HOME:-}${CUDA_PATH:-}${CUDA_ROOT:-}" ]; then
    exec "$@"  # No CUDA toolkit on this machine: nothing to hide.
  fi
  for flags in "--mount" "--mount --map-root-user"; do
    # shellcheck disable=SC2086
    if unshare $flags --propagation private true 2>/dev/null; then
      # shellcheck disable=SC2086
      exec unshare $flags --propagation private "$0" --inside-namespace "$@"
    fi
  done
  echo "error: $0 cannot hide the CUDA toolkit from '$1': it needs a private mount namespace" >&2
  echo "       (unshare --mount, as root or with user namespaces enabled), which is not permitted here." >&2
  echo "       Run it as root, or on a machine without the CUDA toolkit." >&2
  exit 1
fi
shift

# /usr/local/cuda* leave: /usr/local becomes a tmpfs holding every other entry of the real one
# (directories and files bound, links copied), so that no /usr/local/cuda is left for torch's
# fallback to find, not even an empty one. The real /usr/local is reached through a scratch tmpfs
# on /mnt, unmounted again once everything is bound.
if compgen -G "/usr/local/cuda*" >/dev/null; then
  mount -t tmpfs no-cuda-toolkit /mnt
  mkdir /mnt/usr-local
  mount --bind /usr/local /mnt/usr-local
  mount -t tmpfs -o mode=755 usr-local /usr/local
  for entry in /mnt/usr-local/* /mnt/usr-local/.[!.]*; do
    [ -e "$entry" ] || [ -L "$entry" ] || continue
    name=${entry##*/}
    case $name in cuda | cuda-*) continue ;; esac
    if [ -L "$entry" ]; then
      cp -P "$entry" "/usr/local/$name"
    elif [ -d "$entry" ]; then
      mkdir "/usr/local/$name" && mount --bind "$entry" "/usr/local/$name"
    else
      touch "/usr/local/$name" && mount --bind "$entry" "/usr/local/$name"
    fi
  done
  umount --lazy /mnt/usr-local
  umount --lazy /mnt
fi
# Toolkit directories elsewhere (/opt/cuda) become empty, read-only.
while read -r dir; do
  mount -t tmpfs -o ro,size=4k,mode=755 no-cuda-toolkit "$dir"
done < <(toolkit_dirs)
while read -r nvcc; do
  mount --bind /dev/null "$nvcc"
done < <(path_nvccs)
unset CUDA_HOME CUDA_PATH CUDA_ROOT

# What torch and the emulator would find: nothing.
# (Not `command -v`: bash names a file it found on PATH even when it cannot run it.)
while read -r nvcc; do
  if [ -f "$nvcc" ] && [ -x "$nvcc" ]; then
    echo "error: $0: nvcc is still visible ($nvcc)" >&2
    exit 1
  fi
done < <(path_nvccs)
for header in /usr/local/cuda/include/cuda_runtime_api.h /usr/local/cuda/bin/nvcc; do
  if [ -e "$header" ]; then
    echo "error: $0: the CUDA toolkit is still visible ($header)" >&2
    exit 1
  fi
done
if [ -n "$(toolkit_dirs | xargs -r -I{} find {} -mindepth 1 -print -quit)" ]; then
  echo "error: $0: a CUDA toolkit directory still has files" >&2
  exit 1
fi
exec "$@"
