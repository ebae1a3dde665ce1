"""Runtime: the runner, executors, injection, the CLI and the servers."""
