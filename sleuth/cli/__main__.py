from sleuth.cli import entry

entry()
