# shellcheck shell=sh
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
		grep -q "^required $plugdir/hexiscale.so\( \|$\)" "$dest$sysconfdir/slurm/plugstack.conf.d/hexiscale.conf"
	[ -f "$top_builddir/spank/.libs/hexiscale.so" ] &&
		check "the plugin is installed at that path" test -f "$dest$plugdir/hexiscale.so"
fi
check "workflow man page" test -f "$root/share/man/man7/hexiscale.7"
# Every library has a pkg-config file; hexiscale links them all, and a
# program calling the checkpoint and runtime APIs links with it.
for pc in hexiscale hexisched hexickpt hexirt; do
	check "pkg-config file $pc.pc installed" test -f "$root/lib/pkgconfig/$pc.pc"
done
libs=$(PKG_CONFIG_PATH=$root/lib/pkgconfig pkg-config --define-variable=prefix="$root" --libs hexiscale 2>&1)
for l in -lhexisched -lhexickpt -lhexirt; do
	case " $libs " in *" $l "*) pass "pkg-config --libs hexiscale has $l" ;;
	*) fail "pkg-config --libs hexiscale: '$libs' lacks $l" ;; esac
done
# the build's own compiler and sanitizer flags: an ASan+UBSan build's
# libraries need the sanitizer runtime in the program too
mkvar() { sed -n "s/^$1 = //p" "$top_builddir/Makefile" | head -n 1; }
bcc=$(mkvar CC)
san="$(mkvar SAN_CFLAGS) $(mkvar SAN_LDFLAGS)"
cc() { ${bcc:-command cc} $san "$@"; }
if command -v ${bcc:-cc} >/dev/null 2>&1; then
	printf '#include <hexi_ckpt.h>\n#include <hexi_rt.h>\nint main(void){return (int)(long)hexi_ckpt_open + (int)(long)hexi_rt_init + (int)(long)hexi_plan_load;}\n' >"$dest/use.c"
	# shellcheck disable=SC2046
	cc -o "$dest/use" "$dest/use.c" $(PKG_CONFIG_PATH=$root/lib/pkgconfig pkg-config \
		--define-variable=prefix="$root" --cflags --libs hexiscale) -Wl,-rpath-link,"$root/lib" \
		>"$dest/use.log" 2>&1 && pass "a program using hexi_ckpt_open, hexi_rt_init, hexi_plan_load links with pkg-config hexiscale" ||
		{ fail "link with pkg-config hexiscale"; sed 's/^/# /' "$dest/use.log" | head -5; }
	rm -f "$dest/use" "$dest/use.c" "$dest/use.log"
fi
# What the man pages cite is installed under the documentation directory.
docdir=$(sed -n 's/^docdir = //p' "$top_builddir/Makefile" | sed "s|\${datarootdir}|$prefix/share|; s|\${PACKAGE_TARNAME}|hexiscale|; s|\${prefix}|$prefix|")
for f in "$top_srcdir"/doc/*.md; do
	check "doc/$(basename "$f") installed in $docdir" test -f "$dest$docdir/$(basename "$f")"
done
for d in clusters models plans; do
	n_src=$(find "$top_srcdir/examples/$d" -maxdepth 1 -name '*.json' | wc -l)
	n_inst=$(find "$dest$docdir/examples/$d" -maxdepth 1 -name '*.json' 2>/dev/null | wc -l)
	expect_eq "examples/$d: every JSON file installed" "$n_inst" "$n_src"
done
check "examples/pytorch installed" test -f "$dest$docdir/examples/pytorch/hexiscale_torch.py"
# The plugstack snippet: defaults of hexiscale(8), an admin's copy kept.
if [ -f "$top_srcdir/examples/plugstack.conf.d/hexiscale.conf.in" ]; then
	conf=$dest$sysconfdir/slurm/plugstack.conf.d/hexiscale.conf
	check "installed snippet sets no key (hexiscale(8)'s defaults)" \
		sh -c "grep -v '^#' '$conf' | grep -q '^required [^ ]*hexiscale.so\$'"
	echo "required /my/own/hexiscale.so model=llama2-70b" >"$conf"
	make -s --no-print-directory -C "$top_builddir" install-data DESTDIR="$dest" >/dev/null 2>&1
	check "make install again keeps the admin's snippet" grep -q "^required /my/own/hexiscale.so model=llama2-70b" "$conf"
	check "... and puts the new default beside it as .example" test -f "$conf.example"
	rm -f "$conf" "$conf.example"
	ln -s /nonexistent/hexiscale.conf "$conf"
	make -s --no-print-directory -C "$top_builddir" install-data DESTDIR="$dest" >/dev/null 2>&1
	check "a dangling symlink is an admin's file too: left alone" test -L "$conf"
	check "... new default beside it" test -f "$conf.example"
	rm -f "$conf"
fi
PKG_CONFIG_PATH=$root/lib/pkgconfig pkg-config --define-variable=prefix="$root" --libs hexiscale >/dev/null 2>&1 &&
	pass "pkg-config resolves hexiscale" || fail "pkg-config resolves hexiscale"
make -s --no-print-directory -C "$top_builddir" uninstall DESTDIR="$dest" >/dev/null 2>&1
left=$(find "$dest" -type f | grep -v '/etc/' | head -5)
expect_eq "uninstall removes installed files" "$left" ""
done_testing
