"""The end of the chart's and the monitoring tests: every failure found, not only the first."""


def verdict(failures):
    """Prints each failure, or PASS when there is none, and returns the exit code for meson."""
    for f in failures:
        print(f"FAIL {f}")
    if failures:
        return 1
    print("PASS")
    return 0
