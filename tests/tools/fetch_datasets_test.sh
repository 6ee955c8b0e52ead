#!/usr/bin/env bash
# tools/fetch-datasets.sh's download path, offline: apt reads a private configuration (APT_CONFIG) whose
# only source is a local flat repository holding a small fake python3-sklearn .deb, with the same file
# layout as Debian's (some files gzipped, some not). Checks that the script downloads it with apt-get,
# unpacks it and writes exactly the expected files; that it fetches only what is missing; and that a
# failed download exits non-zero saying what to do. Nothing outside a temporary folder is touched.
#   fetch_datasets_test.sh REPO_ROOT
set -uo pipefail
root=${1:?usage: fetch_datasets_test.sh REPO_ROOT}
script="$root/tools/fetch-datasets.sh"
for tool in apt-get apt-cache dpkg dpkg-deb gzip sha256sum; do
  command -v "$tool" >/dev/null || { echo "SKIPPED: '$tool' is not installed (a Debian-based system has it)"; exit 77; }
done
# As non-root the script runs apt-get update through sudo, which drops APT_CONFIG and would use the
# system's sources.
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then
  echo "SKIPPED: needs root (as another user the script's apt-get update goes through sudo, which ignores APT_CONFIG)"
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The fake package: the four files where python3-sklearn has them, two gzipped as Debian ships them.
pkg="$tmp/pkg"
data="$pkg/usr/lib/python3/dist-packages/sklearn/datasets/data"
expected="$tmp/expected"
mkdir -p "$pkg/DEBIAN" "$data" "$expected"
printf '0,1,2,3,0\n4,5,6,7,1\n' >"$expected/digits.csv"
printf '2,2,malignant,benign\n1.5,2.5,0\n3.5,4.5,1\n' >"$expected/breast_cancer.csv"
printf '0.1 0.2\n0.3 0.4\n' >"$expected/diabetes_data_raw.csv"
printf '151\n75\n' >"$expected/diabetes_target.csv"
gzip -c "$expected/digits.csv" >"$data/digits.csv.gz"
cp "$expected/breast_cancer.csv" "$data/breast_cancer.csv"
gzip -c "$expected/diabetes_data_raw.csv" >"$data/diabetes_data_raw.csv.gz"
gzip -c "$expected/diabetes_target.csv" >"$data/diabetes_target.csv.gz"
cat >"$pkg/DEBIAN/control" <<CONTROL
Package: python3-sklearn
Version: 0.0-zpstest
Architecture: all
Maintainer: zps tests <zps@localhost>
Description: fake python3-sklearn for tests/tools/fetch_datasets_test.sh
CONTROL
repo="$tmp/repo"
mkdir -p "$repo"
deb="$repo/python3-sklearn_0.0-zpstest_all.deb"
dpkg-deb --root-owner-group -b "$pkg" "$deb" >/dev/null || { echo "FAIL: dpkg-deb could not build the fake package"; exit 1; }
{
  grep -v '^Description:' "$pkg/DEBIAN/control"
  echo "Filename: ./$(basename "$deb")"
  echo "Size: $(stat -c %s "$deb")"
  echo "SHA256: $(sha256sum "$deb" | cut -d' ' -f1)"
  grep '^Description:' "$pkg/DEBIAN/control"
} >"$repo/Packages"

# apt with nothing of the system's: its own lists, cache, dpkg status and sources.
use_source() {
  rm -rf "$tmp/apt" && mkdir -p "$tmp/apt/state/lists/partial" "$tmp/apt/cache/archives/partial" "$tmp/apt/parts" \
    "$tmp/apt/sources.d"
  : >"$tmp/apt/status"
  echo "deb [trusted=yes] file:$1 ./" >"$tmp/apt/sources.list"
  cat >"$tmp/apt/apt.conf" <<CONF
Dir::State "$tmp/apt/state";
Dir::State::status "$tmp/apt/status";
Dir::Cache "$tmp/apt/cache";
Dir::Etc::sourcelist "$tmp/apt/sources.list";
Dir::Etc::sourceparts "$tmp/apt/sources.d";
Dir::Etc::parts "$tmp/apt/parts";
APT::Sandbox::User "root";
CONF
}
export APT_CONFIG="$tmp/apt/apt.conf"

run() {  # run DIR: runs the script, leaves its output in $out and its exit code in $code
  out=$("$script" "$1" 2>&1)
  code=$?
  echo "$out" | sed 's/^/    /'
}

echo "--- 1. nothing present: apt-get update, apt-get download, dpkg -x, gunzip"
use_source "$repo"
dir="$tmp/data"
run "$dir"
[ "$code" = 0 ] || fail "exit $code, expected 0"
grep -q "downloading python3-sklearn" <<<"$out" || fail "no 'downloading python3-sklearn' line"
for f in digits.csv breast_cancer.csv diabetes_data_raw.csv diabetes_target.csv; do
  cmp -s "$expected/$f" "$dir/$f" || fail "$dir/$f differs from the packaged file"
  grep -q "wrote $dir/$f ($(wc -l <"$expected/$f") lines)" <<<"$out" || fail "no 'wrote $f' line"
done
ls "$dir" | grep -q '\.tmp$' && fail "a .tmp file was left in $dir"

echo "--- 2. everything present: nothing to do"
run "$dir"
[ "$code" = 0 ] && grep -q "all 4 files present" <<<"$out" || fail "exit $code without 'all 4 files present'"

echo "--- 3. one file missing: only it is fetched"
rm "$dir/digits.csv"
echo "kept" >"$dir/breast_cancer.csv"
run "$dir"
[ "$code" = 0 ] || fail "exit $code, expected 0"
grep -q "missing in $dir: digits.csv$" <<<"$out" || fail "it did not name digits.csv alone as missing"
cmp -s "$expected/digits.csv" "$dir/digits.csv" || fail "digits.csv was not written again"
[ "$(cat "$dir/breast_cancer.csv")" = kept ] || fail "a file that was present was overwritten"

expect_download_error() {  # expect_download_error DIR FAILED_STEP
  run "$1"
  [ "$code" != 0 ] || fail "exit 0 after a failed download"
  grep -q "$2 failed (apt's message is above), so python3-sklearn could not be downloaded" <<<"$out" ||
    fail "no '$2 failed ... could not be downloaded' message"
  grep -q "copy digits.csv breast_cancer.csv diabetes_data_raw.csv diabetes_target.csv into $1 from" <<<"$out" ||
    fail "the message does not say which files to copy where"
  [ -z "$(ls -A "$1" 2>/dev/null)" ] || fail "files were left in $1"
}

echo "--- 4. the package lists cannot be fetched: a clear error, exit non-zero, no file written"
mkdir -p "$tmp/empty-repo"
use_source "$tmp/empty-repo"
expect_download_error "$tmp/offline-1" "apt-get update"

echo "--- 5. apt knows the package but its .deb cannot be fetched: the same"
use_source "$repo"
apt-get update -qq || fail "apt-get update from the local repository failed"
mv "$deb" "$tmp/moved.deb"
expect_download_error "$tmp/offline-2" "apt-get download python3-sklearn"

if [ "$failures" -ne 0 ]; then
  echo "fetch_datasets_test: $failures failure(s)"
  exit 1
fi
echo "fetch_datasets_test: PASS (download, unpack, partial fetch, failed update and failed download, all offline)"
