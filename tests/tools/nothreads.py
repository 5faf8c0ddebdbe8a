#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nothreads.py CMD [ARG...] - run CMD where no thread can be created.

A seccomp filter, inherited across exec, makes clone3(2) fail with ENOSYS
(so that glibc falls back to clone) and clone(2) with CLONE_THREAD fail
with EAGAIN: pthread_create() then returns EAGAIN, as it does when the
system is out of threads.  Processes can still be forked.  x86-64 only;
exits 77 elsewhere (the CLI runner's "skipped").
"""
import ctypes
import os
import platform
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
AUDIT_ARCH_X86_64 = 0xC000003E
NR_CLONE, NR_CLONE3 = 56, 435
CLONE_THREAD = 0x10000
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
LD_ABS_W, JEQ_K, JSET_K, RET_K = 0x20, 0x15, 0x45, 0x06
ENOSYS, EAGAIN = 38, 11

# seccomp_data: nr at 0, arch at 4, args[0] at 16 (its low 32 bits)
PROGRAM = [
    (LD_ABS_W, 0, 0, 4),
    (JEQ_K, 0, 7, AUDIT_ARCH_X86_64),       # another ABI: allow
    (LD_ABS_W, 0, 0, 0),
    (JEQ_K, 0, 1, NR_CLONE3),
    (RET_K, 0, 0, RET_ERRNO | ENOSYS),
    (JEQ_K, 0, 3, NR_CLONE),
    (LD_ABS_W, 0, 0, 16),
    (JSET_K, 0, 1, CLONE_THREAD),
    (RET_K, 0, 0, RET_ERRNO | EAGAIN),
    (RET_K, 0, 0, RET_ALLOW),
]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: nothreads.py CMD [ARG...]")
    if platform.machine() != "x86_64":
        print("nothreads.py: x86-64 only")
        sys.exit(77)
    code = b"".join(struct.pack("HBBI", *insn) for insn in PROGRAM)
    filters = ctypes.create_string_buffer(code)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(PROGRAM), ctypes.addressof(filters))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p,
                           ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0 or \
       libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
                  ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        sys.exit("nothreads.py: seccomp: " + os.strerror(err))
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
