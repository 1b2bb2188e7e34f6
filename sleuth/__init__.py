"""sleuth: a Jepsen-style black-box consistency checker for SQL systems (DESIGN.md)."""

__version__ = "0.1.0"
