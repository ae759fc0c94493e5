#!/usr/bin/env bash
# Turn a fresh Debian/Ubuntu PC into a faceswap-kiosk booth. Safe to run again (after an update,
# or to repair): it changes only what differs and says what it changed. See deploy/README.md.
#
#   sudo deploy/install.sh                 # everything: packages, user, app, models, session, service
#   sudo deploy/install.sh --wheel F.whl   # install that wheel (an update) instead of building one
#   sudo deploy/install.sh --dry-run       # show what would change, change nothing
#   deploy/install.sh --root /tmp/stage    # write the files under a staging folder only (tests)
#   sudo deploy/install.sh --tensorrt      # also TensorRT's libraries (GPU runtime: see deploy/gpu-runtime.sh)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
# shellcheck source=deploy/lib.sh
. "$HERE/lib.sh"

SESSION=x11
DO_APT=1
DO_VENV=1
DO_MODELS=1
DO_ENABLE=1
GPU_ARGS=()
WHEEL=""
CONFIG_DIR=/etc/faceswap-kiosk
STATE_DIR=/var/lib/faceswap-kiosk
CACHE_DIR=/var/cache/faceswap-kiosk
APT_PACKAGES=(python3 python3-venv python3-pip xserver-xorg-core xserver-xorg-input-libinput xinit
    x11-xserver-utils libgl1 libegl1 libgl1-mesa-dri v4l-utils)

usage() {
    cat <<EOF
Usage: $0 [options]
  --prefix DIR       application folder (default $PREFIX)
  --user NAME        user that runs the kiosk and owns the screen (default $KIOSK_USER)
  --session KIND     x11 (autologin + minimal X on tty1, default), cage (Wayland kiosk compositor),
                     or none (you provide the display; set DISPLAY in /etc/default/faceswap-kiosk)
  --no-apt           do not install Debian packages
  --wheel FILE       install this faceswap-kiosk wheel (default: build one from this checkout)
  --no-venv          do not create/update the virtualenv
  --no-models        do not run \`kiosk models fetch\`
  --no-enable        install the service but do not enable it at boot
  --gpu              install the GPU runtime (CUDA, cuDNN from pip) even without an NVIDIA driver yet
                     (default: only where one is present: nvidia-smi or /proc/driver/nvidia)
  --no-gpu           never install the GPU runtime (CPU only)
  --tensorrt         also install TensorRT's libraries from pip (for providers order [tensorrt, ...])
  --dry-run          print what would change; change nothing
  --root DIR         stage all files under DIR (implies --no-apt --no-venv --no-models; no users,
                     no running services are touched)
EOF
}

while [ "$#" -gt 0 ]; do
    case "$1" in
        --prefix) PREFIX=${2:?}; shift ;;
        --user) KIOSK_USER=${2:?}; shift ;;
        --session) SESSION=${2:?}; shift ;;
        --no-apt) DO_APT=0 ;;
        --wheel) WHEEL=$(cd "$(dirname "${2:?}")" && pwd)/$(basename "$2"); shift ;;
        --no-venv) DO_VENV=0 ;;
        --no-models) DO_MODELS=0 ;;
        --no-enable) DO_ENABLE=0 ;;
        --gpu | --no-gpu | --tensorrt) GPU_ARGS+=("$1") ;;
        --dry-run) DRY_RUN=1 ;;
        --root) ROOT=$(mkdir -p "${2:?}" && cd "$2" && pwd); shift ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; die "unknown option: $1" ;;
    esac
    shift
done
case "$SESSION" in x11 | cage | none) ;; *) die "--session must be x11, cage or none" ;; esac
case "$PREFIX" in /*) ;; *) die "--prefix must be an absolute path" ;; esac

if staged; then
    DO_APT=0 DO_VENV=0 DO_MODELS=0
elif [ "$(id -u)" != 0 ] && [ "$DRY_RUN" = 0 ]; then
    die "run as root: sudo $0 $*"
fi

KIOSK_HOME=/home/$KIOSK_USER
if ! staged && getent passwd "$KIOSK_USER" >/dev/null; then
    KIOSK_HOME=$(getent passwd "$KIOSK_USER" | cut -d: -f6)
fi
# Edits that carry --prefix/--user into the installed files.
SUBST=(
    "s#/opt/faceswap-kiosk#$PREFIX#g"
    "s#^User=kiosk\$#User=$KIOSK_USER#"
    "s#^Group=kiosk\$#Group=$KIOSK_USER#"
    "s#--autologin kiosk #--autologin $KIOSK_USER #"
    "s#/home/kiosk/#$KIOSK_HOME/#g"
)
UNIT=/etc/systemd/system/faceswap-kiosk.service
DROPIN_DIR=/etc/systemd/system/faceswap-kiosk.service.d

say "faceswap-kiosk install: ${WHEEL:-source $SRC} -> ${ROOT}$PREFIX (session $SESSION, user $KIOSK_USER)"

# 1. Debian packages ------------------------------------------------------------------------------
if [ "$DO_APT" = 1 ]; then
    want=("${APT_PACKAGES[@]}")
    [ "$SESSION" = cage ] && want+=(cage)
    missing=()
    for p in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        changed "apt-get install ${missing[*]}"
        run apt-get update -qq
        run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
fi

# 2. The kiosk user: no password (autologin only), in the device groups --------------------------
if ! staged; then
    if ! getent passwd "$KIOSK_USER" >/dev/null; then
        changed "create user $KIOSK_USER"
        run useradd --create-home --shell /bin/bash --comment "faceswap kiosk" "$KIOSK_USER"
        run passwd --lock "$KIOSK_USER" >/dev/null
    fi
    for g in video input render audio; do
        getent group "$g" >/dev/null || continue
        if ! id -nG "$KIOSK_USER" 2>/dev/null | tr ' ' '\n' | grep -qx "$g"; then
            changed "add $KIOSK_USER to group $g"
            run usermod -aG "$g" "$KIOSK_USER"
        fi
    done
fi

# 3. The appliance files (root-owned): deploy/ and the soak harness (scripts/soak.py, run on the
#    booth before an event: deploy/README.md §10); the application itself is the wheel (step 4) ----
SOAK_FILES=(soak.py soak_inject.py)
if [ "$SRC" != "$PREFIX" ] || staged; then
    sync_tree "$SRC/deploy" "$PREFIX/deploy"
    for old in kiosk shaders configs tests benchmarks docs pyproject.toml README.md; do
        drop "$PREFIX/$old" # a source tree copied there by an older install.sh (editable install)
    done
    if [ -f "$SRC/scripts/soak.py" ]; then
        for f in "${SOAK_FILES[@]}"; do
            if [ -x "$SRC/scripts/$f" ]; then mode=0755; else mode=0644; fi
            put_file "$SRC/scripts/$f" "$PREFIX/scripts/$f" "$mode"
        done
    else
        warn "no scripts/soak.py in $SRC: the soak test (deploy/README.md §10) is not installed"
    fi
    for old in "$ROOT$PREFIX"/scripts/* "$ROOT$PREFIX"/scripts/.[!.]*; do
        [ -e "$old" ] || [ -L "$old" ] || continue
        case " ${SOAK_FILES[*]} " in
            *" ${old##*/} "*) ;;
            *) drop "$PREFIX/scripts/${old##*/}" ;; # the rest of an older install's scripts/
        esac
    done
fi

# 4. Virtualenv with the kiosk installed from a wheel, never editable: a booth never runs from a git
#    checkout, and an update is a new wheel. Re-run only when the wheel or the sources changed.
if [ "$DO_VENV" = 1 ]; then
    venv=$PREFIX/.venv
    if [ ! -x "$venv/bin/python" ]; then
        changed "create virtualenv $venv"
        run python3 -m venv "$venv"
    fi
    [ -z "$WHEEL" ] || [ -f "$WHEEL" ] || die "--wheel $WHEEL: no such file"
    stamp=$venv/.faceswap-kiosk-installed
    if [ -n "$WHEEL" ]; then
        want_stamp=$(sha256sum "$WHEEL" | cut -d' ' -f1)
    else
        want_stamp=$(package_sources "$SRC" | (cd "$SRC" && xargs -d '\n' sha256sum) | sha256sum | cut -d' ' -f1)
    fi
    if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want_stamp" ] || [ ! -x "$venv/bin/kiosk" ]; then
        wheel=$WHEEL
        if [ -z "$wheel" ]; then
            changed "build the faceswap-kiosk wheel from $SRC"
            build=$(mktemp -d)
            if [ "$DRY_RUN" = 0 ]; then
                package_sources "$SRC" | (cd "$SRC" && xargs -d '\n' cp --parents -t "$build")
                run "$venv/bin/pip" wheel --quiet --no-deps -w "$build/dist" "$build"
                wheel=$(ls "$build"/dist/faceswap_kiosk-*.whl)
            fi
        fi
        changed "pip install ${wheel:-<the wheel>} into $venv"
        run "$venv/bin/pip" install --quiet --upgrade pip
        run "$venv/bin/pip" install --quiet "$wheel"
        # The same version number may hold newer code: this exact wheel replaces what is there.
        run "$venv/bin/pip" install --quiet --force-reinstall --no-deps "$wheel"
        if [ -z "$WHEEL" ]; then rm -rf "$build"; fi
        [ "$DRY_RUN" = 1 ] || printf '%s\n' "$want_stamp" >"$stamp"
    fi
fi

# 4b. GPU runtime from pip (CUDA, cuDNN, optionally TensorRT) where an NVIDIA driver is present -----
if [ "$DO_VENV" = 1 ]; then
    mapfile -t gpu_specs < <(bash "$HERE/gpu-runtime.sh" "$PREFIX/.venv/bin/python" "${GPU_ARGS[@]}")
    gpu_stamp=$PREFIX/.venv/.faceswap-kiosk-gpu
    if [ "${#gpu_specs[@]}" -gt 0 ] && [ "$(cat "$gpu_stamp" 2>/dev/null || true)" != "${gpu_specs[*]}" ]; then
        changed "pip install ${gpu_specs[*]} (the GPU runtime; no CUDA toolkit needed)"
        run "$PREFIX/.venv/bin/pip" install --quiet "${gpu_specs[@]}"
        [ "$DRY_RUN" = 1 ] || printf '%s\n' "${gpu_specs[*]}" >"$gpu_stamp"
    fi
fi

# 5. Config (never overwritten), data and cache folders -----------------------------------------
put_dir "$CONFIG_DIR" 0755
if [ -e "$ROOT$CONFIG_DIR/kiosk.yaml" ]; then
    say "  keep $ROOT$CONFIG_DIR/kiosk.yaml (yours; the shipped one is $PREFIX/deploy/kiosk.yaml)"
else
    put_file "$SRC/deploy/kiosk.yaml" "$CONFIG_DIR/kiosk.yaml" 0644
fi
[ -e "$ROOT/etc/default/faceswap-kiosk" ] || put_file "$SRC/deploy/system/default.env" /etc/default/faceswap-kiosk 0644
put_dir "$STATE_DIR" 0755 "$KIOSK_USER"
put_dir "$STATE_DIR/models" 0755 "$KIOSK_USER"
put_dir "$STATE_DIR/faces" 0755 "$KIOSK_USER"
put_dir "$CACHE_DIR" 0755 "$KIOSK_USER"
put_dir "$CACHE_DIR/trt" 0755 "$KIOSK_USER"
if [ -f "$SRC/faces/default.jpg" ] && [ ! -e "$ROOT$STATE_DIR/faces/default.jpg" ]; then
    put_file "$SRC/faces/default.jpg" "$STATE_DIR/faces/default.jpg" 0644
fi

# 6. Models (downloaded and verified by the kiosk itself; resumable) ------------------------------
if [ "$DO_MODELS" = 1 ]; then
    say "  kiosk models fetch (downloads what is missing, verifies SHA-256)"
    if ! run runuser -u "$KIOSK_USER" -- "$PREFIX/.venv/bin/kiosk" models fetch --config "$CONFIG_DIR/kiosk.yaml"; then
        warn "model download failed; run it again later: sudo -u $KIOSK_USER $PREFIX/.venv/bin/kiosk models fetch --config $CONFIG_DIR/kiosk.yaml"
    fi
fi

# Compile the numba kernels ahead into the service's cache (CacheDirectory=), so even the first start
# only loads them.
if [ "$DO_VENV" = 1 ] && ! staged; then
    say "  compile the kiosk's kernels into $CACHE_DIR/numba"
    run runuser -u "$KIOSK_USER" -- env CACHE_DIRECTORY="$CACHE_DIR" "$PREFIX/.venv/bin/python" -c \
        'from kiosk.inference import kernels; kernels.warm_up()' || warn "kernel compile failed; the kiosk compiles them at its first start"
fi

# 7. Service, logs, power, devices ---------------------------------------------------------------
put_file "$SRC/deploy/system/faceswap-kiosk.service" "$UNIT" 0644 "${SUBST[@]}"
systemd_version=$(systemctl --version 2>/dev/null | awk 'NR==1 {print $2}' || true)
if [ "${systemd_version:-0}" -ge 254 ] 2>/dev/null; then
    put_file "$SRC/deploy/system/backoff.conf" "$DROPIN_DIR/backoff.conf" 0644
else
    drop "$DROPIN_DIR/backoff.conf"
fi
# Keepsakes and the staff console (docs/keepsakes.md, docs/console.md): the unit as shipped has no
# network at all; with keepsake.enabled or console.enabled the installed kiosk writes a drop-in from
# the config that opens those listen ports to keepsake.allow and console.allow.
# Run install.sh again (or `kiosk keepsake network --output ...`) after changing those keys.
KIOSK_EXE=$ROOT$PREFIX/.venv/bin/kiosk
if [ -x "$KIOSK_EXE" ]; then
    net=$(mktemp)
    if "$KIOSK_EXE" keepsake network --config "$ROOT$CONFIG_DIR/kiosk.yaml" >"$net"; then
        if [ -s "$net" ]; then
            put_file "$net" "$DROPIN_DIR/keepsake.conf" 0644
        else
            drop "$DROPIN_DIR/keepsake.conf"
        fi
    else
        warn "keepsake network rules not written (fix $CONFIG_DIR/kiosk.yaml, then run install.sh again)"
    fi
    rm -f "$net"
fi
put_file "$SRC/deploy/system/journald-faceswap-kiosk.conf" /etc/systemd/journald.conf.d/faceswap-kiosk.conf 0644
put_file "$SRC/deploy/system/logind-faceswap-kiosk.conf" /etc/systemd/logind.conf.d/faceswap-kiosk.conf 0644
put_file "$SRC/deploy/system/70-faceswap-kiosk.rules" /etc/udev/rules.d/70-faceswap-kiosk.rules 0644

# 8. Display session -----------------------------------------------------------------------------
AUTOLOGIN=/etc/systemd/system/getty@tty1.service.d/faceswap-kiosk-autologin.conf
NOBLANK=/etc/X11/xorg.conf.d/10-faceswap-kiosk-noblank.conf
CAGE_UNIT=/etc/systemd/system/faceswap-kiosk-cage.service
CAGE_PAM=/etc/pam.d/faceswap-kiosk-cage
if [ "$SESSION" = x11 ]; then
    put_file "$SRC/deploy/session/getty-autologin.conf" "$AUTOLOGIN" 0644 "${SUBST[@]}"
    put_file "$SRC/deploy/session/10-faceswap-kiosk-noblank.conf" "$NOBLANK" 0644
    put_file "$SRC/deploy/session/bash_profile" "$KIOSK_HOME/.bash_profile" 0644 "${SUBST[@]}"
    if ! staged && [ "$DRY_RUN" = 0 ]; then chown "$KIOSK_USER:" "$KIOSK_HOME/.bash_profile"; fi
else
    drop "$AUTOLOGIN"
    drop "$NOBLANK"
    if grep -qs "faceswap-kiosk deploy/install.sh" "$ROOT$KIOSK_HOME/.bash_profile"; then
        drop "$KIOSK_HOME/.bash_profile"
    fi
fi
if [ "$SESSION" = cage ]; then
    put_file "$SRC/deploy/session/faceswap-kiosk-cage.service" "$CAGE_UNIT" 0644 "${SUBST[@]}"
    put_file "$SRC/deploy/session/pam-faceswap-kiosk-cage" "$CAGE_PAM" 0644
    uid=1000
    staged || uid=$(id -u "$KIOSK_USER" 2>/dev/null || echo 1000)
    put_file "$SRC/deploy/session/cage.conf" "$DROPIN_DIR/session-cage.conf" 0644 "s#@UID@#$uid#g"
else
    if [ -e "$ROOT$CAGE_UNIT" ]; then systemctl_do disable faceswap-kiosk-cage.service; fi
    drop "$CAGE_UNIT"
    drop "$CAGE_PAM"
    drop "$DROPIN_DIR/session-cage.conf"
fi

# 9. Enable at boot; never sleep ------------------------------------------------------------------
is_enabled() {
    if staged; then
        systemctl --root="$ROOT" is-enabled "$1" 2>/dev/null | grep -qx "$2"
    else
        systemctl is-enabled "$1" 2>/dev/null | grep -qx "$2"
    fi
}
if command -v systemctl >/dev/null 2>&1; then
    staged || run systemctl daemon-reload
    if [ "$DO_ENABLE" = 1 ] && ! is_enabled faceswap-kiosk.service enabled; then
        changed "enable faceswap-kiosk.service"
        systemctl_do enable faceswap-kiosk.service
    fi
    if [ "$SESSION" = cage ] && ! is_enabled faceswap-kiosk-cage.service enabled; then
        changed "enable faceswap-kiosk-cage.service"
        systemctl_do enable faceswap-kiosk-cage.service
    fi
    for t in sleep.target suspend.target hibernate.target hybrid-sleep.target; do
        if [ "$(readlink "$ROOT/etc/systemd/system/$t" 2>/dev/null || true)" != /dev/null ]; then
            changed "mask $t"
            systemctl_do mask "$t"
        fi
    done
    if ! staged; then
        if systemctl is-enabled display-manager.service >/dev/null 2>&1; then
            warn "a desktop login screen (display-manager.service) is enabled and takes the screen;" \
                "disable it: sudo systemctl disable display-manager.service && sudo systemctl set-default multi-user.target"
        fi
        if [ "$CHANGES" -gt 0 ]; then
            run udevadm control --reload || true
            run udevadm trigger --subsystem-match=video4linux --subsystem-match=input || true
            run systemctl try-restart systemd-journald.service || true
        fi
    fi
fi

say "faceswap-kiosk install: $CHANGES change(s)$([ "$DRY_RUN" = 1 ] && echo ' (dry run: nothing changed)')."
if ! staged && [ "$DRY_RUN" = 0 ]; then
    say "Check the booth:  sudo -u $KIOSK_USER $PREFIX/.venv/bin/kiosk doctor --config $CONFIG_DIR/kiosk.yaml"
    say "Then reboot:      sudo reboot   (the kiosk appears on the screen by itself)"
fi
