"""sleuth: a Jepsen-style black-box consistency checker for SQL systems (README.md, docs/architecture.md)."""

__version__ = "0.1.0"
