"""Who holds a run: the owner id of an exclusive ``Run``, and whether its process still lives.

An owner id is ``host:pid:start:serial``: the host (with its PID namespace
where Linux shows it, so two containers that share a host name are told
apart), the process id, the process's start time, and a serial per ``Run``
object of the process. The start time makes a reused pid a different
owner; the serial makes two ``Run`` objects of one process two owners, so
that each is fenced on its own.

On Linux the start time is ``/proc/<pid>/stat``'s starttime (clock ticks
since boot), so another process on the same host can be judged from
outside: absent, a zombie, or another start time means the holder is gone
and its lease can be taken over at once. Elsewhere the start time is this
process's own clock reading at first use, and another process is gone only
when ``os.kill(pid, 0)`` says there is no such pid (never tried on Windows,
where it would kill); a pid that exists counts as alive, so its lease is
waited out — never taken from a live holder.
"""

from __future__ import annotations

import itertools
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass

_serials = itertools.count(1)
_identity: dict[int, tuple[int, str, str]] = {}  # pid -> (pid, host, start): new after a fork
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Owner:
    """An owner id, read back: where its process runs, which process, which ``Run`` object."""

    host: str
    pid: int
    start: str
    serial: int

    @property
    def id(self) -> str:
        return f"{self.host}:{self.pid}:{self.start}:{self.serial}"


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """``(state, starttime)`` of a Linux process from /proc, or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields count from its last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    return (fields[0], fields[19]) if len(fields) > 19 else None


def _host() -> str:
    host = socket.gethostname() or "localhost"
    try:  # 'pid:[4026531836]': the PID namespace this process sees pids in
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return host
    inode = "".join(ch for ch in namespace if ch.isdigit())
    return f"{host}/{inode}" if inode else host


def this_process() -> tuple[int, str, str]:
    """``(pid, host, start)`` of this process, worked out again after a fork."""
    pid = os.getpid()
    known = _identity.get(pid)
    if known is not None:
        return known
    with _lock:
        stat = _proc_stat(pid) if sys.platform.startswith("linux") else None
        start = stat[1] if stat is not None else f"t{time.time_ns() // 1_000_000}"
        return _identity.setdefault(pid, (pid, _host(), start))


def new_owner() -> Owner:
    """A fresh owner id for one ``Run`` of this process."""
    pid, host, start = this_process()
    return Owner(host, pid, start, next(_serials))


def parse(owner: str | None) -> Owner | None:
    """The parts of an owner id ``new_owner`` made; None for anything else (a worker's id)."""
    if owner is None:
        return None
    parts = owner.rsplit(":", 3)
    if len(parts) != 4 or not (parts[1].isdigit() and parts[3].isdigit() and parts[2]):
        return None
    return Owner(parts[0], int(parts[1]), parts[2], int(parts[3]))


def mine(owner: Owner) -> bool:
    """Whether ``owner`` belongs to this very process."""
    pid, host, start = this_process()
    return (owner.host, owner.pid, owner.start) == (host, pid, start)


def gone(owner: Owner) -> bool:
    """Whether ``owner``'s process, on this host, is known to have ended (False when unsure)."""
    pid, host, start = this_process()
    if owner.host != host or owner.pid <= 0:
        return False  # another host (or namespace): only its lease's expiry tells
    if owner.pid == pid:
        return owner.start != start  # this pid, an earlier process (before a reboot)
    stat = None if start.startswith("t") else _proc_stat(owner.pid)
    if stat is None:  # no /proc, or this pid's entry is hidden (hidepid) or absent
        return _no_such_pid(owner.pid)
    # A zombie (killed, not yet reaped) runs no more code; another start time is another process.
    return stat[0] in ("Z", "X") or stat[1] != owner.start


def _no_such_pid(pid: int) -> bool:
    """Whether no process has ``pid`` (signal 0 checks without sending; never on Windows)."""
    if os.name != "posix":
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: it exists, another user's
        return False
    return False
