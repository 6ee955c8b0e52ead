#!/usr/bin/env bash
# Fetches the small public datasets that Debian ships inside python3-sklearn (digits,
# breast_cancer, diabetes) into a data folder, without installing Python: `apt-get download` fetches
# the .deb and `dpkg -x` unpacks it into a temporary folder. The training loaders
# (train/dataset.h) read the files it leaves:
#   digits.csv             1797 rows: 64 pixel values, then the digit (comma separated, no header)
#   breast_cancer.csv      "569,30,malignant,benign", then 569 rows: 30 features, then the class
#   diabetes_data_raw.csv  442 rows of 10 raw features (space separated)
#   diabetes_target.csv    442 targets, one per line
#
# Usage: tools/fetch-datasets.sh [DIR]
#   DIR defaults to $ZPS_DATA_DIR, else data/ at the repo root (git ignores /data/).
# Does nothing when every file is present, so scripts can call it unconditionally.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data_dir="${1:-${ZPS_DATA_DIR:-$repo_root/data}}"
pkg=python3-sklearn
files=(digits.csv breast_cancer.csv diabetes_data_raw.csv diabetes_target.csv)

missing=()
for f in "${files[@]}"; do
  [ -s "$data_dir/$f" ] || missing+=("$f")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "fetch-datasets: all ${#files[@]} files present in $data_dir"
  exit 0
fi
echo "fetch-datasets: missing in $data_dir: ${missing[*]}"

for tool in apt-get dpkg gzip; do
  if ! command -v "$tool" >/dev/null; then
    echo "fetch-datasets: '$tool' not found; this script needs a Debian-based system" >&2
    exit 2
  fi
done

# apt's own message says what failed; this says what to do about it.
download_failed() {
  echo "fetch-datasets: $1 failed (apt's message is above), so $pkg could not be downloaded." >&2
  echo "fetch-datasets: check that this machine reaches the Debian mirrors in /etc/apt/sources.list(.d)," >&2
  echo "fetch-datasets: or copy ${missing[*]} into $data_dir from a machine where this script ran" >&2
  exit 1
}

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

# A fresh container has empty package lists, and then apt-get download knows no package at all.
if ! apt-cache show "$pkg" >/dev/null 2>&1; then
  echo "fetch-datasets: apt does not know $pkg yet; running apt-get update"
  $SUDO apt-get update -qq || download_failed "apt-get update"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# As root, apt downloads as the _apt user, who cannot write into this private folder; apt then
# falls back to root with a warning. Asking for root up front gives the same result quietly.
size="$(apt-cache show "$pkg" 2>/dev/null | awk '/^Size:/ { printf "%.1f MB", $2 / 1e6; exit }')"
echo "fetch-datasets: downloading $pkg${size:+ ($size)} with apt-get download"
started=$SECONDS
if [ -t 1 ]; then
  # On a terminal apt draws its own progress bar; in a log it would be noise, so it stays quiet.
  (cd "$tmp" && apt-get download -o APT::Sandbox::User=root "$pkg") || download_failed "apt-get download $pkg"
else
  (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg" >/dev/null) || download_failed "apt-get download $pkg"
fi
deb="$(ls "$tmp"/"$pkg"_*.deb 2>/dev/null | head -n 1)"
if [ -z "$deb" ]; then
  echo "fetch-datasets: apt-get download $pkg produced no .deb" >&2
  exit 1
fi
echo "fetch-datasets: downloaded $(basename "$deb") ($(du -k "$deb" | cut -f1) kB) in $((SECONDS - started)) s"
echo "fetch-datasets: unpacking $(basename "$deb") with dpkg -x"
dpkg -x "$deb" "$tmp/root"

src="$tmp/root/usr/lib/python3/dist-packages/sklearn/datasets/data"
if [ ! -d "$src" ]; then
  echo "fetch-datasets: $(basename "$deb") has no sklearn/datasets/data folder" >&2
  exit 1
fi

mkdir -p "$data_dir"
for f in "${missing[@]}"; do
  if [ -f "$src/$f" ]; then
    cp "$src/$f" "$data_dir/$f.tmp"
  elif [ -f "$src/$f.gz" ]; then
    gzip -dc "$src/$f.gz" >"$data_dir/$f.tmp"
  else
    echo "fetch-datasets: $(basename "$deb") has neither $f nor $f.gz" >&2
    exit 1
  fi
  # Rename last, so an interrupted run never leaves a truncated file that looks present.
  mv "$data_dir/$f.tmp" "$data_dir/$f"
  echo "fetch-datasets: wrote $data_dir/$f ($(wc -l <"$data_dir/$f") lines)"
done
