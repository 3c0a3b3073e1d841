# install.sh: `make install DESTDIR=...` puts every built program, the
# plugin, libraries, headers, man pages, the pkg-config file and the
# example plugstack config where an admin expects them; uninstall removes them.
. "$top_srcdir/tests/tap.sh"
# A sub-make started from a test must not inherit the test run's jobserver.
unset MAKEFLAGS MFLAGS MAKELEVEL
dest=$(mktemp -d /tmp/hexi-install-XXXXXX) || hard "mktemp failed"
trap 'rm -rf "$dest"' EXIT
make -s --no-print-directory -C "$top_builddir" install DESTDIR="$dest" >"$dest.log" 2>&1 ||
	{ cat "$dest.log"; rm -f "$dest.log"; hard "make install failed"; }
rm -f "$dest.log"
prefix=$(sed -n 's/^prefix = //p' "$top_builddir/Makefile")
sysconfdir=$(sed -n 's/^sysconfdir = //p' "$top_builddir/Makefile" | sed "s|\${prefix}|$prefix|")
root=$dest$prefix

for prog in scheduler/hexiplan checkpoint/hexickpt runtime/hexitrain profiler/hexiprof; do
	name=${prog#*/}
	if [ -x "$top_builddir/$prog" ]; then
		check "bin/$name installed" test -x "$root/bin/$name"
		check "man page of $name installed" test -f "$root/share/man/man1/$name.1"
	fi
done
check "libhexisched installed" test -e "$root/lib/libhexisched.so"
check "hexi_sched.h installed" test -f "$root/include/hexi_sched.h"
check "hexi_common.h installed" test -f "$root/include/hexi_common.h"
check "pkg-config file installed" test -f "$root/lib/pkgconfig/hexiscale.pc"
if [ -f "$top_builddir/spank/.libs/hexiscale.so" ]; then
	check "plugin installed" sh -c "find '$dest' -name hexiscale.so | grep -q ."
	check "no libtool archive of the plugin" sh -c "! find '$dest' -name hexiscale.la | grep -q ."
	check "plugin man page" test -f "$root/share/man/man8/hexiscale.8"
fi
if [ -f "$top_srcdir/examples/plugstack.conf.d/hexiscale.conf.in" ]; then
	check "example plugstack config installed" \
		test -f "$dest$sysconfdir/slurm/plugstack.conf.d/hexiscale.conf"
	plugdir=$(make -s --no-print-directory -C "$top_builddir" print-slurmplugindir 2>/dev/null)
	check "example plugstack config names the installed plugin ($plugdir)" \
		grep -q "^required $plugdir/hexiscale.so " "$dest$sysconfdir/slurm/plugstack.conf.d/hexiscale.conf"
	[ -f "$top_builddir/spank/.libs/hexiscale.so" ] &&
		check "the plugin is installed at that path" test -f "$dest$plugdir/hexiscale.so"
fi
check "workflow man page" test -f "$root/share/man/man7/hexiscale.7"
PKG_CONFIG_PATH=$root/lib/pkgconfig pkg-config --define-variable=prefix="$root" --libs hexiscale >/dev/null 2>&1 &&
	pass "pkg-config resolves hexiscale" || fail "pkg-config resolves hexiscale"
make -s --no-print-directory -C "$top_builddir" uninstall DESTDIR="$dest" >/dev/null 2>&1
left=$(find "$dest" -type f | grep -v '/etc/' | head -5)
expect_eq "uninstall removes installed files" "$left" ""
done_testing
