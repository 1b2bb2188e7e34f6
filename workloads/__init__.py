"""sleuth.workloads — generators and clients (and simulated databases for tests)."""

# The databases `sleuth sim` simulates (sim_list_append owns what each does);
# here, free of imports, so the CLI can offer them without loading numpy.
SIM_DBS = ("serializable", "snapshot-isolation", "read-committed", "stale-reads")
