"""sleuth.nemesis — see docs/architecture.md."""
