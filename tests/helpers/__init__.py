"""Programs the tests run as real child processes."""
