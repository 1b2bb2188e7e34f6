"""sleuth.reports — see docs/architecture.md."""
