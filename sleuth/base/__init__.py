"""The words and contracts every room shares: exit statuses and a verdict's spellings, names, plurals, JSON files, interrupts, the parts' protocols (seams). Imports nothing of sleuth."""
