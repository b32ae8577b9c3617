"""Model adapters, one file per family. Names map to classes in ``benchmark.registry``."""
