"""sleuth.reports — see DESIGN.md."""
