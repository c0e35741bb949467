#!/bin/bash
# The Debian package: dpkg-buildpackage -us -uc -b on a copy of the source
# tree builds recon-fuse_*.deb; its file list, conffiles and dependencies are
# what debian/ promises; lintian (when installed) reports no error; the
# package unpacked into an empty root (dpkg -x) mounts an image with its own
# binary and the installed /etc/recon-fuse.conf, directly and through
# mount.fuse3, and its recon-check scans it.
# Skips (77) where dpkg-buildpackage or the build dependencies are missing
# (CI installs them from .ci/packages-deb).
. "$(dirname "$0")/lib.sh"
need_root
command -v dpkg-buildpackage >/dev/null || skip "no dpkg-buildpackage (package dpkg-dev)"
command -v dh >/dev/null || skip "no debhelper (CI installs .ci/packages-deb)"

src="$SCRATCH/src" root="$SCRATCH/root"
mkdir -p "$src" "$root"
# the source tree as git sees it (committed or not), without build directories
if git -C "$RECON_SRC" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$RECON_SRC" && git ls-files -co --exclude-standard -z | grep -zv '^build' |
		tar --null -cf - -T -) | tar -xf - -C "$src" || die "cannot copy the source tree"
else
	tar -C "$RECON_SRC" --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$src" ||
		die "cannot copy the source tree"
fi
(cd "$src" && dpkg-checkbuilddeps) >"$SCRATCH/builddeps.log" 2>&1 ||
	skip "build dependencies missing: $(tail -1 "$SCRATCH/builddeps.log")"

t0=$(date +%s)
(cd "$src" && DEB_BUILD_OPTIONS="noddebs parallel=2" dpkg-buildpackage -us -uc -b) \
	>"$SCRATCH/build.log" 2>&1 || { tail -30 "$SCRATCH/build.log"; die "dpkg-buildpackage failed"; }
log "dpkg-buildpackage: $(( $(date +%s) - t0 )) s"
deb=$(ls "$SCRATCH"/recon-fuse_*.deb 2>/dev/null | head -1)
[ -f "$deb" ] || die "no recon-fuse_*.deb next to the source tree"

# the files, the conffile, the dependencies
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's#^\./#/#' >"$SCRATCH/files"
for f in /usr/bin/recon-fuse /usr/bin/recon-check /etc/recon-fuse.conf \
	/usr/share/man/man8/recon-fuse.8.gz /usr/share/man/man8/recon-check.8.gz \
	/usr/share/doc/recon-fuse/copyright; do
	grep -qx "$f" "$SCRATCH/files" || fail "$f is not in the package"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./conffiles 2>/dev/null | grep -qx /etc/recon-fuse.conf ||
	fail "/etc/recon-fuse.conf is not a conffile"
depends=$(dpkg-deb -f "$deb" Depends)
[[ $depends == *fuse3* ]] || fail "Depends does not name fuse3: $depends"
if command -v lintian >/dev/null; then
	lintian "$deb" >"$SCRATCH/lintian.log" 2>&1
	if grep -q '^E:' "$SCRATCH/lintian.log"; then
		fail "lintian reports errors:"
		grep '^E:' "$SCRATCH/lintian.log" | sed 's/^/    /'
	fi
	log "lintian: $(grep -c '^[EW]:' "$SCRATCH/lintian.log") errors and warnings"
else
	log "lintian not installed: not run"
fi

# installed into an empty root: the package's own binaries, man pages, config
dpkg -x "$deb" "$root" || die "dpkg -x failed"
cmp -s "$root/etc/recon-fuse.conf" "$RECON_SRC/recon.conf" ||
	fail "/etc/recon-fuse.conf is not the repository's recon.conf"
if command -v man >/dev/null; then
	for p in recon-fuse recon-check; do
		warn=$(MANWIDTH=80 man --warnings -l "$root/usr/share/man/man8/$p.8.gz" 2>&1 >/dev/null)
		[ -z "$warn" ] || fail "man $p: $warn"
	done
fi
"$root/usr/bin/recon-fuse" --version | grep -q '^recon-fuse ' || fail "the installed recon-fuse --version"
RECON_FUSE="$root/usr/bin/recon-fuse"
img="$SCRATCH/pkg.img" mnt="$SCRATCH/mnt"
mkimg "$img" 4096 32M
"$root/usr/bin/recon-check" --scan "$img" >"$SCRATCH/scan.log" 2>&1 ||
	fail "the installed recon-check --scan of a fresh image: $(cat "$SCRATCH/scan.log")"
if mount_recon "$img" "$mnt" "config=$root/etc/recon-fuse.conf"; then
	[ "$(readlink "/proc/$RECON_PID/exe")" = "$(readlink -f "$RECON_FUSE")" ] ||
		fail "the daemon is not the package's binary"
	echo "from the package" >"$mnt/hello" || fail "write through the package's daemon"
	umount_recon "$mnt"
	fsck_clean "$img" "after the package's mount"
	[ "$(debugfs -R "cat /hello" "$img" 2>/dev/null)" = "from the package" ] ||
		fail "the file written through the package's daemon is not on disk"
else
	fail "the package's recon-fuse did not mount"
fi

# as mount(8) runs it: mount.fuse3 (the fuse3 package the .deb depends on)
# starts the program named before '#' (mount -t fuse.recon-fuse finds the
# installed /usr/bin/recon-fuse on the standard path the same way)
if command -v mount.fuse3 >/dev/null; then
	pidf="$SCRATCH/recon.pid"
	if mount.fuse3 "$RECON_FUSE#$img" "$mnt" -o "pidfile=$pidf" >"$SCRATCH/mountfuse.log" 2>&1; then
		MOUNTS+=("$mnt")
		pid=$(cat "$pidf" 2>/dev/null)
		[ -n "$pid" ] && PIDS+=("$pid")
		awk -v d="$(realpath "$mnt")" '$5 == d' /proc/self/mountinfo | grep -q ' - fuse.recon-fuse ' ||
			fail "mount.fuse3: the mount's type is not fuse.recon-fuse"
		[ "$(cat "$mnt/hello" 2>/dev/null)" = "from the package" ] || fail "read through mount.fuse3"
		umount "$mnt" || fail "umount of the mount.fuse3 mount"
		for ((i = 0; i < 600 * TMUL; i++)); do [ -e "$pidf" ] || break; sleep 0.1; done
		if [ -e "$pidf" ]; then fail "the daemon started by mount.fuse3 did not exit after umount"
		elif [ -n "$pid" ]; then forget_pid "$pid"; fi
		fsck_clean "$img" "after the mount.fuse3 mount"
	else
		fail "mount.fuse3 with the package's binary: $(cat "$SCRATCH/mountfuse.log")"
	fi
fi
finish
