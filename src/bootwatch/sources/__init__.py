"""Sources: turn a place (a file, a process, an ssh link…) into chunks of complete log lines."""
