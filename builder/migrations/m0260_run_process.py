"""Who runs a stage run: the process id, host and process start time (issue 22).

A run killed with SIGKILL (or whose machine lost power, or whose disk filled before its end
could be written) stayed ``running`` for good. With these columns ``builder status`` and the
next run of any stage can tell that the process is gone — same host, and no process with that
id, or one with that id that started at another time (the id was reused) — and show the run
``interrupted``; the next run records it so (:mod:`builder.liveness`). A run of another host is
never judged. ``proc_start`` is the kernel's start time of the process (``/proc/PID/stat``
field 22, clock ticks since boot) with the boot id, NULL where ``/proc`` is not there.
"""

VERSION = 260

SQL = """
ALTER TABLE stage_runs ADD COLUMN pid INTEGER;
ALTER TABLE stage_runs ADD COLUMN host TEXT;
ALTER TABLE stage_runs ADD COLUMN proc_start TEXT;
"""
