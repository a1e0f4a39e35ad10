"""Client processes in lockstep: every child runs one phase at a time, on the parent's word.

``Writers`` starts one ``pg_writer.py`` child per writer and drives them in
*phases*: the parent tells every child to run ``count`` operations of one
contender, waits until all of them are done, and records the phase's wall
time and the CPU the server, the clients and the whole machine used in it.
A rate is then operations / summed phase time, where a phase lasts until its
slowest writer is done. With ``wal_url``, the parent also reads the server's
WAL position before and after each phase (outside the timed span): the WAL
bytes a phase wrote, which is all the server's WAL, so only meaningful while
nothing else writes to it. Alternating phases of two contenders (safepoint
saves, then raw commits, then saves …) puts both on the same server at the
same moments, the way the SQLite section interleaves raw commits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pg_server
import psycopg
from pg_server import CpuSample

WRITER = Path(__file__).resolve().parent / "pg_writer.py"


@dataclass(slots=True)
class Tally:
    """Everything the phases of one contender add up to."""

    ops: int = 0
    seconds: float = 0.0  # summed phase wall time
    phases: int = 0
    cpu: CpuSample = pg_server.ZERO
    wal_bytes: int = 0
    phase_ops: list[int] = field(default_factory=list)
    phase_seconds: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0


class Writers:
    """``len(specs)`` child processes; child i opens the contenders in ``specs[i]``."""

    def __init__(self, specs: list[list[dict[str, Any]]], *, wal_url: str | None = None) -> None:
        self._wal = psycopg.connect(wal_url, autocommit=True) if wal_url is not None else None
        self._children = [
            subprocess.Popen(
                [sys.executable, str(WRITER), json.dumps(child)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                bufsize=1,
            )
            for child in specs
        ]
        self.tallies: dict[str, Tally] = {}
        try:
            for child in self._children:
                self._expect(child, "ready")
        except BaseException:
            self.kill()
            raise

    @property
    def pids(self) -> list[int]:
        return [child.pid for child in self._children]

    def phase(self, name: str, count: int) -> int:
        """Every child does up to ``count`` operations of contender ``name``; total operations done."""
        wal_before = self._wal_position()
        before = pg_server.sample(self.pids)
        start = time.perf_counter()
        for child in self._children:
            assert child.stdin is not None
            child.stdin.write(f"go {name} {count}\n")
            child.stdin.flush()
        done = sum(int(self._expect(child, "done")) for child in self._children)
        seconds = time.perf_counter() - start
        used = pg_server.sample(self.pids) - before
        wal = self._wal_position() - wal_before
        tally = self.tallies.setdefault(name, Tally())
        tally.ops += done
        tally.seconds += seconds
        tally.phases += 1
        tally.cpu = tally.cpu + used
        tally.wal_bytes += wal
        tally.phase_ops.append(done)
        tally.phase_seconds.append(seconds)
        return done

    def finish(self) -> list[dict[str, Any]]:
        """Every child's results (one dict per child: contender name -> its result), children ended."""
        out = []
        try:
            for child in self._children:
                assert child.stdin is not None
                child.stdin.write("end\n")
                child.stdin.flush()
                out.append(json.loads(self._expect(child, "result")))
            for child in self._children:
                if child.wait(timeout=60) != 0:
                    raise RuntimeError(f"benchmark writer {child.pid} exited with {child.returncode}")
        finally:
            self.kill()
        return out

    def kill(self) -> None:
        for child in self._children:
            if child.poll() is None:
                child.kill()
                child.wait()
        if self._wal is not None:
            self._wal.close()

    def _wal_position(self) -> int:
        if self._wal is None:
            return 0
        row = self._wal.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
        return int(row[0]) if row else 0

    def __enter__(self) -> Writers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    @staticmethod
    def _expect(child: subprocess.Popen[str], word: str) -> str:
        assert child.stdout is not None
        line = child.stdout.readline()
        head, _, rest = line.rstrip("\n").partition(" ")
        if head != word:
            child.kill()
            raise RuntimeError(
                f"benchmark writer {child.pid} said {line[:200]!r} instead of {word!r} "
                f"(exit code {child.wait()}; its errors are above)"
            )
        return rest
