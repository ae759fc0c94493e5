# shellcheck shell=bash
# Shared helpers of deploy/install.sh and deploy/uninstall.sh (sourced, not run).
#
# Every change goes through these functions, so both scripts are idempotent (a file is written
# only when its content differs), count what they changed, and honour --dry-run and --root.

CHANGES=0
DRY_RUN=0
ROOT=""           # stage into this folder instead of / (tests, image building): no apt, users, services
# shellcheck disable=SC2034  # used by the scripts that source this file
PREFIX=/opt/faceswap-kiosk
# shellcheck disable=SC2034
KIOSK_USER=kiosk

say() { printf '%s\n' "$*"; }
warn() { printf 'WARNING: %s\n' "$*" >&2; }
die() {
    printf 'ERROR: %s\n' "$*" >&2
    exit 1
}

changed() {
    CHANGES=$((CHANGES + 1))
    if [ "$DRY_RUN" = 1 ]; then say "  would: $*"; else say "  $*"; fi
}

# run CMD...: run a command that changes the system (printed, and skipped in --dry-run).
run() {
    if [ "$DRY_RUN" = 1 ]; then
        say "  would run: $*"
        return 0
    fi
    "$@"
}

# staged: true when working on a staging root (--root), where system commands are skipped.
staged() { [ -n "$ROOT" ]; }

# put_file SRC DEST MODE [SED_EXPR...]: install SRC (after optional sed edits) at $ROOT/DEST.
put_file() {
    local src=$1 dest=$ROOT$2 mode=$3
    shift 3
    local tmp
    tmp=$(mktemp)
    if [ "$#" -gt 0 ]; then
        local args=()
        local e
        for e in "$@"; do args+=(-e "$e"); done
        sed "${args[@]}" "$src" >"$tmp"
    else
        cat "$src" >"$tmp"
    fi
    if [ -f "$dest" ] && cmp -s "$tmp" "$dest" && [ "$(stat -c %a "$dest")" = "${mode#0}" ]; then
        rm -f "$tmp"
        return 0
    fi
    changed "write $dest"
    if [ "$DRY_RUN" = 1 ]; then
        rm -f "$tmp"
        return 0
    fi
    mkdir -p "$(dirname "$dest")"
    install -m "$mode" "$tmp" "$dest"
    rm -f "$tmp"
}

# put_dir DIR MODE [OWNER]: make sure $ROOT/DIR exists.
put_dir() {
    local dir=$ROOT$1 mode=$2 owner=${3:-}
    if [ ! -d "$dir" ]; then
        changed "create $dir"
        run mkdir -p "$dir"
        run chmod "$mode" "$dir"
    fi
    if [ -n "$owner" ] && ! staged && [ -d "$dir" ] && [ "$(stat -c %U "$dir")" != "$owner" ]; then
        changed "chown $owner $dir"
        run chown "$owner:" "$dir"
    fi
}

# drop PATH: remove $ROOT/PATH (file or folder) if it is there.
drop() {
    local path=$ROOT$1
    if [ -e "$path" ] || [ -L "$path" ]; then
        changed "remove $path"
        run rm -rf "$path"
    fi
}

# The files of the application tree, relative to SRC: no VCS, caches, virtualenv or model weights.
app_files() {
    (cd "$1" && find . \( -name .git -o -name .venv -o -name __pycache__ -o -name .pytest_cache \
        -o -name .mypy_cache -o -name .ruff_cache -o -name '*.egg-info' -o -name build -o -name dist \
        -o -path ./models/trt_cache -o -path ./out -o -path ./.cache \) -prune -o -type f \
        ! -name '*.pyc' ! -name '*.onnx' ! -name '*.part' ! -name '*.tmp' ! -name '*.log' -print) | LC_ALL=C sort
}

# package_sources SRC: the files the faceswap-kiosk wheel is built from, relative to SRC.
package_sources() {
    app_files "$1" | grep -E '^\./(kiosk/|pyproject\.toml$|README\.md$)' | sed 's#^\./##'
}

# sync_tree SRC DEST: make $ROOT/DEST hold exactly the application files of SRC (root-owned).
sync_tree() {
    local src=$1 dest=$2 f mode
    while IFS= read -r f; do
        f=${f#./}
        if [ -x "$src/$f" ]; then mode=0755; else mode=0644; fi
        put_file "$src/$f" "$dest/$f" "$mode"
    done < <(app_files "$src")
    # Files left from an older version (the virtualenv and model weights are not ours to remove).
    if [ -d "$ROOT$dest" ]; then
        while IFS= read -r f; do
            f=${f#./}
            [ -e "$src/$f" ] || drop "$dest/$f"
        done < <(app_files "$ROOT$dest")
    fi
}

# systemctl_do ARGS...: systemctl on the live system, or offline on the staging root.
systemctl_do() {
    if staged; then
        if command -v systemctl >/dev/null 2>&1; then
            run systemctl --root="$ROOT" --quiet "$@" 2>/dev/null || true
        fi
    else
        run systemctl "$@"
    fi
}
