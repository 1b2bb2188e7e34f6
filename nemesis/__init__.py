"""sleuth.nemesis — see DESIGN.md."""
