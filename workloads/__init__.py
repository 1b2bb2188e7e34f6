"""sleuth.workloads — generators and clients (and simulated databases for tests)."""
