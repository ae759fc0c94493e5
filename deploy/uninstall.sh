#!/usr/bin/env bash
# Undo deploy/install.sh: stop and remove the service, the display session, device rules and the
# application. The booth's config, models, faces and the kiosk user stay unless --purge is given.
#
#   sudo deploy/uninstall.sh [--purge] [--dry-run]     deploy/uninstall.sh --root /tmp/stage
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/lib.sh
. "$HERE/lib.sh"
PURGE=0

while [ "$#" -gt 0 ]; do
    case "$1" in
        --prefix) PREFIX=${2:?}; shift ;;
        --user) KIOSK_USER=${2:?}; shift ;;
        --purge) PURGE=1 ;;
        --dry-run) DRY_RUN=1 ;;
        --root) ROOT=$(cd "${2:?}" && pwd); shift ;;
        -h | --help)
            echo "Usage: $0 [--prefix DIR] [--user NAME] [--purge] [--dry-run] [--root DIR]"
            exit 0
            ;;
        *) die "unknown option: $1" ;;
    esac
    shift
done
if ! staged && [ "$(id -u)" != 0 ] && [ "$DRY_RUN" = 0 ]; then
    die "run as root: sudo $0 $*"
fi
KIOSK_HOME=/home/$KIOSK_USER
if ! staged && getent passwd "$KIOSK_USER" >/dev/null; then
    KIOSK_HOME=$(getent passwd "$KIOSK_USER" | cut -d: -f6)
fi

say "faceswap-kiosk uninstall: ${ROOT}$PREFIX$([ "$PURGE" = 1 ] && echo ' (purge: config, data, user too)')"

if command -v systemctl >/dev/null 2>&1; then
    for unit in faceswap-kiosk.service faceswap-kiosk-cage.service; do
        [ -e "$ROOT/etc/systemd/system/$unit" ] || continue
        changed "disable $unit"
        if staged; then systemctl_do disable "$unit"; else run systemctl disable --now "$unit" || true; fi
    done
    for t in sleep.target suspend.target hibernate.target hybrid-sleep.target; do
        if [ "$(readlink "$ROOT/etc/systemd/system/$t" 2>/dev/null || true)" = /dev/null ]; then
            changed "unmask $t"
            systemctl_do unmask "$t"
        fi
    done
fi

drop /etc/systemd/system/faceswap-kiosk.service
drop /etc/systemd/system/faceswap-kiosk.service.d
drop /etc/systemd/system/faceswap-kiosk-cage.service
drop /etc/pam.d/faceswap-kiosk-cage
drop /etc/systemd/system/getty@tty1.service.d/faceswap-kiosk-autologin.conf
drop /etc/X11/xorg.conf.d/10-faceswap-kiosk-noblank.conf
drop /etc/systemd/journald.conf.d/faceswap-kiosk.conf
drop /etc/systemd/logind.conf.d/faceswap-kiosk.conf
drop /etc/udev/rules.d/70-faceswap-kiosk.rules
if grep -qs "faceswap-kiosk deploy/install.sh" "$ROOT$KIOSK_HOME/.bash_profile"; then
    drop "$KIOSK_HOME/.bash_profile"
fi
drop "$PREFIX"

if [ "$PURGE" = 1 ]; then
    drop /etc/faceswap-kiosk
    drop /etc/default/faceswap-kiosk
    drop /var/lib/faceswap-kiosk
    drop /var/cache/faceswap-kiosk
    drop /var/log/faceswap-kiosk
    if ! staged && getent passwd "$KIOSK_USER" >/dev/null; then
        changed "remove user $KIOSK_USER and $KIOSK_HOME"
        run userdel --remove "$KIOSK_USER" 2>/dev/null || true
    fi
else
    say "  kept: /etc/faceswap-kiosk (config), /var/lib/faceswap-kiosk (models, faces), user $KIOSK_USER"
fi

if ! staged && command -v systemctl >/dev/null 2>&1 && [ "$CHANGES" -gt 0 ]; then
    run systemctl daemon-reload
    run udevadm control --reload || true
fi
say "faceswap-kiosk uninstall: $CHANGES change(s)$([ "$DRY_RUN" = 1 ] && echo ' (dry run: nothing changed)')."
