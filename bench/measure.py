"""Running a command and measuring it: wall time, CPU time, and peak memory
two ways.

* total RSS: ru_maxrss from wait4. It counts every resident page,
  including the pages of memory-mapped input files that were read: those
  are page cache shared with every other reader, not memory the tool
  allocated, so for tools that map their input it overstates their cost.
* anonymous RSS: RssAnon of /proc/PID/status, sampled every millisecond
  while the command runs (the kernel keeps no peak of it). This is the
  memory the process allocated (heap, stacks, private copies). A peak that
  lasts less than the sampling interval can be missed, so it is a lower
  bound; buffers that matter live for tens of milliseconds or more.
"""

import os
import subprocess
import sys
import threading
import time
from typing import NamedTuple


class Measured(NamedTuple):
    wall: float  # seconds
    total_mib: float  # peak total RSS
    anon_mib: float  # peak anonymous RSS (sampled)
    cpu: float  # user + system seconds


def _rss_anon_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run(cmd, cwd, env=None):
    """Runs cmd (exits the script if it fails) and measures it."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss_anon_kib(proc.pid))
            time.sleep(0.001)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"command failed ({code}): {' '.join(cmd)}\n{err}")
    return Measured(wall, usage.ru_maxrss / 1024.0, peak[0] / 1024.0, usage.ru_utime + usage.ru_stime)
