"""The one way tests wait for something: poll a check until it holds or time runs out."""
import time


def wait_for(what, check, timeout, interval=0.1):
    """Calls `check()` every `interval` s until it returns something truthy, and returns that.
    After `timeout` s raises AssertionError naming `what` (a string, or a callable giving one,
    called only then, e.g. to show the latest state)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what() if callable(what) else what}")
        time.sleep(interval)
