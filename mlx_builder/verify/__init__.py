"""The verify stage: testing a built wheel (its own venv, upstream's tests
and our SDPA suites, JUnit), benchmarking it (workers, results, plots), the
SDPA routing probe, and the nightly run of every series against upstream."""
