// Memory-pressure signals.
