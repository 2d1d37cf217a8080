from bootwatch.cli import entry

entry()
