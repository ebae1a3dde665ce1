"""Start processes that try to outlive the step, then hang, return, or kill the parent."""

from __future__ import annotations

import os
import signal
import subprocess
import time


def run(mode: str, ready_file: str) -> dict[str, object]:
    # Its own session, stdout inherited and held open, its shell waiting on it.
    holder = subprocess.Popen(["sh", "-c", "sleep infinity; :"], start_new_session=True)
    # Its own session, then orphaned at once: the shell exits, the sleep is left.
    subprocess.run(["sh", "-c", "sleep infinity &"], start_new_session=True, check=True)
    with open(ready_file + ".tmp", "w") as handle:
        handle.write(str(holder.pid))
    os.replace(ready_file + ".tmp", ready_file)
    if mode == "kill-parent":
        parent = os.getppid()
        os.kill(parent, signal.SIGKILL)
        return {"killed": parent}
    if mode == "hang":
        while True:
            time.sleep(3600)
    return {"started": holder.pid}
