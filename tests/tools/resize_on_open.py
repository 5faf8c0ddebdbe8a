#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""resize_on_open.py SIZE FILE... -- CMD [ARG...] - run CMD, truncating
each FILE to SIZE bytes whenever CMD opens it.

A file that shrinks (or grows) between the stat that sized it and the read
of its bytes, without timing: a fanotify permission mark (FAN_OPEN_PERM)
holds every open of FILE until this process has truncated it, through the
fd the event carries (opened by the kernel without notifying, so the
truncation makes no event of its own).  CMD therefore stats FILE at its
old size and reads it at SIZE.  Exits with CMD's status; exits 77 (the CLI
runner's "skipped") where fanotify permission events are not available
(no root, or a kernel without CONFIG_FANOTIFY_ACCESS_PERMISSIONS).
"""
import ctypes
import os
import select
import struct
import sys

FAN_CLASS_CONTENT = 0x04
FAN_CLOEXEC = 0x01
FAN_MARK_ADD = 0x01
FAN_OPEN_PERM = 0x00010000
FAN_ALLOW = 0x01
AT_FDCWD = -100
# struct fanotify_event_metadata: event_len, vers, reserved,
# metadata_len, mask, fd, pid
EVENT = struct.Struct("=IBBHQii")


def skip(why):
    print(f"SKIP: fanotify permission events: {why}")
    sys.exit(77)


def usage():
    print(__doc__.split("\n\n")[0], file=sys.stderr)
    sys.exit(2)


def mark(size_files):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint,
                                   ctypes.c_uint64, ctypes.c_int,
                                   ctypes.c_char_p]
    fan = libc.fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC,
                             os.O_RDWR | os.O_LARGEFILE)
    if fan < 0:
        skip(os.strerror(ctypes.get_errno()))
    for f in size_files:
        if libc.fanotify_mark(fan, FAN_MARK_ADD, FAN_OPEN_PERM, AT_FDCWD,
                              os.fsencode(f)) < 0:
            err = ctypes.get_errno()
            if err in (22, 95):     # EINVAL, EOPNOTSUPP: no perm events
                skip(os.strerror(err))
            sys.exit(f"resize_on_open.py: {f}: {os.strerror(err)}")
    return fan


def answer(fan, size):
    """Handle the events read at once: truncate, then let the open go on."""
    buf = os.read(fan, 4096)
    off = 0
    while off + EVENT.size <= len(buf):
        length, _, _, _, mask, fd, _ = EVENT.unpack_from(buf, off)
        if fd >= 0:
            if mask & FAN_OPEN_PERM:
                os.ftruncate(fd, size)
                os.write(fan, struct.pack("=iI", fd, FAN_ALLOW))
            os.close(fd)
        off += length


def main():
    if "--" not in sys.argv:
        usage()
    sep = sys.argv.index("--")
    files, cmd = sys.argv[2:sep], sys.argv[sep + 1:]
    if len(sys.argv) < 3 or not files or not cmd:
        usage()
    size = int(sys.argv[1])
    fan = mark(files)
    pid = os.fork()
    if pid == 0:
        os.execvp(cmd[0], cmd)
    child = os.pidfd_open(pid)
    while True:
        ready, _, _ = select.select([fan, child], [], [])
        if fan in ready:
            answer(fan, size)
        elif child in ready:
            break
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))


main()
