"""sleuth.cluster — see DESIGN.md."""
