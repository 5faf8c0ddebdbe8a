# hunion - union/overlay filesystem layers at rest.
#
#   make            build ./hunion
#   make deps       install the Debian packages the build and tests need
#   make check      lint, build, then every test suite, plain and under ASan+UBSan
#   make demo       merge the bundled example stack and show the result
#   make bench      benchmarks against cp -a and an overlay mount (slow)
#   make install    PREFIX=/usr/local DESTDIR= (and mount.union,
#                   mount.hunion in MOUNTHELPERDIR=/sbin for mount(8))

CC      ?= cc
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
BASHDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHDIR  ?= $(PREFIX)/share/zsh/vendor-completions
FISHDIR ?= $(PREFIX)/share/fish/vendor_completions.d
# mount(8) runs its helpers (mount.union, mount.hunion) from /sbin only
# (libmount's search path: /sbin:/sbin/fs.d:/sbin/fs, never PATH), so
# they do not follow PREFIX.
MOUNTHELPERDIR ?= /sbin

# libarchive and libcrypto are loaded on demand (lib/tar/archive_dl.c,
# lib/common/crypto_dl.c), never linked by hunion: their headers only
# (dlopen() is in libc since glibc 2.34: no -ldl).  The unit tests and
# the fuzz targets, which call them too, link them.
PKGS     = libattr libzstd zlib jansson liblzma libxxhash
DL_PKGS  = libarchive libcrypto
DL_LIBS  = $(shell pkg-config --libs $(DL_PKGS) 2>/dev/null || echo -larchive -lcrypto)
WARN     = -Wall -Wextra -Wformat=2 -Wmissing-prototypes -Wvla -Wshadow \
           -Wstrict-prototypes -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN    += -Werror
endif
OPT     ?= -O2 -g
CPPFLAGS += -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Ilib
CFLAGS  += -std=c11 -pthread $(OPT) $(WARN) $(shell pkg-config --cflags $(DL_PKGS) $(PKGS) 2>/dev/null)
# libbz2 ships no pkg-config file
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lattr -lzstd -lz -ljansson -llzma -lxxhash) -lbz2

B       ?= build
LIB_SRC  = $(sort $(wildcard lib/*/*.c))
CMD_SRC  = $(sort $(wildcard cmd/*.c))
UNIT_SRC = $(sort $(wildcard tests/unit/*.c))
LIB_OBJ  = $(LIB_SRC:%.c=$(B)/%.o)
CMD_OBJ  = $(CMD_SRC:%.c=$(B)/%.o)
UNIT_OBJ = $(UNIT_SRC:%.c=$(B)/%.o)
MANS     = $(patsubst man/%.scd,$(B)/man/%,$(wildcard man/*.scd))

# The Debian packages the build, the docs and the tests use.
DEB_PKGS = build-essential clang pkg-config libarchive-dev libattr1-dev \
           libzstd-dev liblzma-dev libbz2-dev libssl-dev zlib1g-dev libcriterion-dev scdoc attr python3 \
           libarchive-tools e2fsprogs util-linux kmod rsync zstd pigz xz-utils bzip2 umoci time \
           zsh fish xfsprogs libcap2-bin cppcheck shellcheck fuse-overlayfs \
           libjansson-dev libxxhash-dev skopeo podman busybox-static \
           docker-registry runc strace erofs-utils

.PHONY: all deps check check-plain check-asan demo bench install lint print-libs \
        clean completions man unit-bin fuzz fuzz-replay
.DELETE_ON_ERROR:

all: hunion man

hunion: $(B)/hunion
	ln -sf $(B)/hunion hunion

$(B)/hunion: $(LIB_OBJ) $(CMD_OBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/libhunion.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(B)/%.o: %.c lib/*.h lib/*/*.h lib/*/*.def cmd/*.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(B)/unit-tests: $(UNIT_OBJ) $(B)/libhunion.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(UNIT_OBJ) $(B)/libhunion.a \
		$(DL_LIBS) $(LDLIBS) -lcriterion

# The path index from the outside, for tests/kernel/pindex.sh.
$(B)/pindex-tool: tests/tools/pindex_tool.c $(B)/libhunion.a
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libhunion.a \
		$(DL_LIBS) $(LDLIBS)

unit-bin: $(B)/unit-tests $(B)/pindex-tool

man: $(MANS)
$(B)/man/%: man/%.scd
	@mkdir -p $(dir $@)
	@if command -v scdoc >/dev/null; then scdoc < $< > $@; \
	 else echo "scdoc missing (make deps): skipping $@"; fi

# Install what is missing; as non-root print the command instead.  apt
# waits for the dpkg lock (another make deps beside this one, or an
# unattended upgrade) instead of failing at once.
deps:
	@missing=$$(for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
		grep -q '^install ok installed' || echo $$p; done); \
	if [ -z "$$missing" ]; then echo "deps: all present"; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "deps: installing" $$missing; \
		apt-get -o DPkg::Lock::Timeout=600 update -qq && \
		DEBIAN_FRONTEND=noninteractive \
		apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
		--no-install-recommends $$missing >/dev/null \
		|| exit 1; \
	else echo "deps: run as root: apt-get install -y" $$missing; exit 1; fi

# Both builds run every suite even when one fails; the exit says if any did.
# Each build says how long it took, run-all.sh how long each suite did.
check: deps
	@rc=0; t=$$(date +%s); $(MAKE) --no-print-directory lint || rc=1; \
	$(MAKE) WERROR=1 check-plain || rc=1; \
	$(MAKE) WERROR=1 check-asan || rc=1; \
	echo "check: $$(($$(date +%s) - t)) s in all"; \
	if [ $$rc = 0 ]; then echo "check: all suites passed"; \
	else echo "check: FAILED"; fi; exit $$rc

# The builds of check use every core unless make was given -j (CI has 2).
CHECK_J  = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 1))
ASAN_OPT = -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=all

check-plain:
	@t=$$(date +%s); \
	$(MAKE) $(CHECK_J) all unit-bin $(B)/libhunion.a || exit 1; \
	echo "build ($(B)): $$(($$(date +%s) - t)) s"
	tests/run-all.sh $(B)

check-asan:
	@t=$$(date +%s); \
	$(MAKE) $(CHECK_J) B=build-asan CC=clang OPT="$(ASAN_OPT)" \
		LDFLAGS="-fsanitize=address,undefined" build-asan/hunion \
		unit-bin build-asan/libhunion.a || exit 1; \
	echo "build (build-asan): $$(($$(date +%s) - t)) s"
	HUNION_SANITIZED=1 tests/run-all.sh build-asan

demo: deps all
	examples/demo.sh ./hunion

bench: deps all
	bench/run.sh ./hunion
	bench/mergedown.sh ./hunion

completions: hunion
	./hunion __complete bash > completions/hunion.bash
	./hunion __complete zsh > completions/_hunion
	./hunion __complete fish > completions/hunion.fish

install: all
	install -Dm755 $(B)/hunion $(DESTDIR)$(BINDIR)/hunion
	for m in $(MANS); do s=$${m##*.}; \
		install -Dm644 $$m $(DESTDIR)$(MANDIR)/man$$s/$$(basename $$m); done
	install -Dm644 completions/hunion.bash $(DESTDIR)$(BASHDIR)/hunion
	install -Dm644 completions/_hunion $(DESTDIR)$(ZSHDIR)/_hunion
	install -Dm644 completions/hunion.fish $(DESTDIR)$(FISHDIR)/hunion.fish
	install -d $(DESTDIR)$(MOUNTHELPERDIR)
	for h in mount.union mount.hunion; do \
		ln -sfn $(BINDIR)/hunion $(DESTDIR)$(MOUNTHELPERDIR)/$$h; done

# Static checks of the C and of the shell scripts; make check runs them.
lint:
	@ok=0 bad=0; \
	if cppcheck --quiet --enable=warning,performance,portability \
		--error-exitcode=1 -D_GNU_SOURCE lib cmd; \
	then ok=$$((ok + 1)); else bad=$$((bad + 1)); fi; \
	if shellcheck tests/*.sh tests/*/*.sh examples/*.sh bench/*.sh; \
	then ok=$$((ok + 1)); else bad=$$((bad + 1)); fi; \
	echo "lint: $$ok passed, $$bad failed (cppcheck, shellcheck)"; \
	[ $$bad = 0 ]

clean:
	rm -rf build build-asan build-fuzz hunion

# ---- fuzzing.  tests/fuzz/NAME_fuzz.c are libFuzzer targets; their seed
# corpora are tests/fuzz/corpus/NAME/ (replayed by make check).
FUZZ_SRC  = $(sort $(wildcard tests/fuzz/*_fuzz.c))
FUZZ_TIME ?= 60
FUZZ_OPT  = -O1 -g -fsanitize=fuzzer-no-link,address,undefined \
            -fno-omit-frame-pointer -fno-sanitize-recover=all

# What a program linked against libhunion.a needs (tests/fuzz/replay.sh).
print-libs:
	@echo $(DL_LIBS) $(LDLIBS)

fuzz-replay: $(B)/libhunion.a
	tests/fuzz/replay.sh $(B)

fuzz:
	$(MAKE) B=build-fuzz CC=clang OPT="$(FUZZ_OPT)" build-fuzz/libhunion.a
	@for f in $(FUZZ_SRC); do n=$$(basename $$f _fuzz.c); \
		clang -std=c11 $(CPPFLAGS) $(FUZZ_OPT) -fsanitize=fuzzer \
			-o build-fuzz/$$n-fuzz $$f build-fuzz/libhunion.a \
			$(DL_LIBS) $(LDLIBS) || exit 1; \
		mkdir -p build-fuzz/corpus-$$n; \
		build-fuzz/$$n-fuzz -max_total_time=$(FUZZ_TIME) \
			build-fuzz/corpus-$$n tests/fuzz/corpus/$$n || exit 1; \
	done
